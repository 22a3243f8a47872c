"""The host-side reading of a sandbox diff: what changed outside the outputs, carrying the outputs."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ares.images.rootfs import OverlayMount
from ares.sandbox.local import diff

MOUNTS = (OverlayMount("/", ("l0",)), OverlayMount("/etc", ("l1",)))


def _upper(tmp_path: Path) -> Path:
    upper = tmp_path / "upper"
    root, etc = upper / "_root", upper / "etc"
    (root / "workspace" / "pkg").mkdir(parents=True)
    (root / "workspace" / "solution.py").write_text("x = 1\n")
    (root / "workspace" / "pkg" / "mod.py").write_text("")
    os.mknod(root / "workspace" / "gone.txt", stat.S_IFCHR | 0o000, 0)  # a whiteout: deleted
    (root / "usr" / "bin").mkdir(parents=True)
    (root / "usr" / "bin" / "python3").write_text("#!/bin/sh\necho forged\n")
    (root / "tmp" / "empty").mkdir(parents=True)
    (root / "opt" / "tool").mkdir(parents=True)
    os.setxattr(root / "opt" / "tool", "user.overlay.opaque", b"y")
    (root / "opt" / "tool" / "new").write_text("")
    etc.mkdir()
    os.mknod(etc / "hostname", stat.S_IFCHR | 0o000, 0)
    return upper


def test_summary_lists_changes_outside_the_outputs_in_walk_order(tmp_path: Path) -> None:
    summary = diff.summarize_outside(_upper(tmp_path), MOUNTS, ["/workspace"])
    assert summary.paths == (
        "/opt/tool (replaced)",
        "/opt/tool/new",
        "/tmp/empty",
        "/usr/bin/python3",
        "/etc/hostname (deleted)",
    )
    assert summary.count == 5 and not summary.truncated


def test_summary_is_bounded(tmp_path: Path) -> None:
    upper = _upper(tmp_path)
    summary = diff.summarize_outside(upper, MOUNTS, ["/workspace"], keep=2)
    assert summary.count == 5 and len(summary.paths) == 2
    (upper / "_root" / "many").mkdir()
    for i in range(50):
        (upper / "_root" / "many" / str(i)).write_text("")
    old = diff.MAX_WALK
    diff.MAX_WALK = 20
    try:
        assert diff.summarize_outside(upper, MOUNTS, ["/workspace"]).truncated
    finally:
        diff.MAX_WALK = old


def test_carry_moves_only_the_outputs_and_keeps_parent_modes(tmp_path: Path) -> None:
    upper = _upper(tmp_path)
    nested = upper / "_root" / "home" / "user"
    (nested / "project").mkdir(parents=True)
    (nested / "project" / "main.py").write_text("print(1)\n")
    os.chmod(nested, 0o750)
    os.chown(nested, 1000, 1000)
    os.setxattr(upper / "_root" / "home", "user.overlay.opaque", b"y")
    layer = tmp_path / "layer"
    diff.carry_outputs(upper, MOUNTS, ["/workspace", "/home/user/project", "/etc", "/absent"], layer)
    assert (layer / "_root" / "workspace" / "solution.py").read_text() == "x = 1\n"
    assert stat.S_ISCHR(os.lstat(layer / "_root" / "workspace" / "gone.txt").st_mode)
    assert not (upper / "_root" / "workspace").exists()
    assert (layer / "_root" / "home" / "user" / "project" / "main.py").exists()
    st = os.stat(layer / "_root" / "home" / "user")
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o750, 1000, 1000)
    assert b"y" not in [
        os.getxattr(layer / "_root" / "home", a) for a in os.listxattr(layer / "_root" / "home")
    ]
    assert stat.S_ISCHR(os.lstat(layer / "etc" / "hostname").st_mode)  # a whole mount carries its upper
    assert not (layer / "_root" / "usr").exists() and not (layer / "_root" / "absent").exists()


def test_carry_never_follows_a_symlink_in_the_diff(tmp_path: Path) -> None:
    """A diff that re-points a parent of an output at a host dir must not move host files."""
    host = tmp_path / "host-dir"
    (host / "project").mkdir(parents=True)
    (host / "project" / "keep.txt").write_text("host file")
    upper = tmp_path / "upper"
    (upper / "_root").mkdir(parents=True)
    (upper / "_root" / "srv").symlink_to(host)
    (upper / "_root" / "workspace").symlink_to(host / "project")
    layer = tmp_path / "layer"
    diff.carry_outputs(upper, MOUNTS, ["/srv/project", "/workspace"], layer)
    assert (host / "project" / "keep.txt").read_text() == "host file"
    assert not (layer / "_root" / "srv").exists() and not (layer / "_root" / "workspace").exists()
    assert (upper / "_root" / "workspace").is_symlink()
