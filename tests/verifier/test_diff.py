"""The host-side reading of a sandbox diff: what changed outside the outputs, carrying the outputs."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from ares.errors import OutputRefusedError
from ares.images.rootfs import OverlayMount
from ares.sandbox.carry_bounds import CarryBounds, CarryBudget
from ares.sandbox.local import diff, layers

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


def _count_lstat(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    real = layers.os.lstat

    def counted(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        seen.append(str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(layers.os, "lstat", counted)
    return seen


def test_one_huge_dir_outside_the_outputs_is_summarized_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent's flood of one dir (millions of files in /tmp) costs the summary a bounded listing:
    past the bound the dir is named, not stat'ed entry by entry."""
    upper = _upper(tmp_path)
    flood = upper / "_root" / "tmp" / "flood"
    flood.mkdir()
    for i in range(300):
        (flood / str(i)).write_text("")
    monkeypatch.setattr(diff, "MAX_WALK", 50)
    seen = _count_lstat(monkeypatch)
    summary = diff.summarize_outside(upper, MOUNTS, ["/workspace"])
    assert summary.truncated
    assert "/tmp/flood (over 50 entries, not listed)" in summary.paths
    assert not [p for p in seen if p.startswith(str(flood) + "/")]


def test_a_snapshot_carry_never_reads_dirs_off_the_outputs_and_refuses_a_huge_one_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    upper = _upper(tmp_path)
    outside, inside = upper / "_root" / "tmp" / "flood", upper / "_root" / "workspace" / "flood"
    for where in (outside, inside):
        where.mkdir()
        for i in range(60):
            (where / str(i)).write_text("")
    seen = _count_lstat(monkeypatch)
    budget = CarryBudget(CarryBounds(max_entries=1000))
    layers.write_merged([upper], MOUNTS, tmp_path / "layer", ["/workspace"], check=budget)
    assert (tmp_path / "layer" / "_root" / "workspace" / "flood" / "59").exists()
    assert not (tmp_path / "layer" / "_root" / "tmp").exists()
    assert not [p for p in seen if p.startswith(str(outside))]
    seen.clear()
    small = CarryBudget(CarryBounds(max_entries=40))
    with pytest.raises(OutputRefusedError) as refused:
        layers.write_merged([upper], MOUNTS, tmp_path / "layer2", ["/workspace"], check=small)
    assert refused.value.reason == "too_many_entries" and "/workspace/flood" in refused.value.detail
    assert not [p for p in seen if p.startswith(str(inside) + "/")]
