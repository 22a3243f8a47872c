"""Snapshots of the local sandbox: freeze mid-way, restore, fork, export/import, discard, no leaks.

The in-process tests run as whoever runs the suite (root in CI: idmapped layers, the sandbox dir on
its disk-limit tmpfs, layers bind-mounted out of it; ``rlimit`` mode keeps it on disk and renames).
``test_flow_as`` runs one whole flow in a child interpreter as root and as uid 65534 (unprivileged
overlay: ``userxattr`` opaque marks, whiteouts made by an ordinary user), with the export imported
by a second, new process.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import textwrap
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from ares.errors import SandboxError
from ares.images.layer_writer import LayerWriter, UnsafeEntry
from ares.sandbox.base import SandboxSpec
from ares.sandbox.capabilities import Capability, CapabilityError
from ares.sandbox.local import LocalSandbox, janitor
from ares.sandbox.local import snapshot as local_snapshot
from ares.sandbox.snapshots import ARCHIVE_FORMAT, FilesystemSnapshot
from ares.sandbox.warm_pool import WarmPool
from nobody_python import DROP, SKIP_REASON, nobody_python

SRC = Path(__file__).resolve().parents[2] / "src"
ROOT = os.geteuid() == 0

#: Before the snapshot: files, a mode, an owner (root-run), a symlink, a hard link, a file of the
#: image deleted, a dir of the image replaced (opaque), a background process.
SETUP = (
    "set -e; cd /workspace; printf one > a; mkdir -p d/e; printf deep > d/e/f; chmod 0640 d/e/f; "
    "ln -s a link; ln a hard; printf x > mode; chmod 4751 mode; "
    "touch owned; chown 1000:1001 owned 2>/dev/null || true; "
    "mkdir -p /opt/tool && printf old > /opt/tool/keep; "
    "rm /etc/hostname; rm -rf /etc/opt; mkdir /etc/opt; printf new > /etc/opt/only; "
    "(sleep 4321 >/dev/null 2>&1 &)"
)
#: What a sandbox shows of the paths SETUP touched (types, modes, owners, link targets, hashes).
STATE = (
    "cd / && find workspace opt etc/opt -printf '%p %M %U %G %l\\n' | sort; "
    "find workspace -type f -printf 'links %p %n\\n' | sort; "
    "find workspace opt etc/opt -type f -exec sha256sum {} + | sort; "
    "test -e etc/hostname && echo hostname-present || echo hostname-absent; ls /etc/opt | wc -l"
)


def host_processes_with(text: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if text.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.append(int(pid))
            except OSError:
                continue
    return found


def mounts_below(path: Path) -> list[str]:
    text = Path("/proc/self/mountinfo").read_text()
    return [line for line in text.splitlines() if str(path) in line]


async def state(sb: LocalSandbox) -> str:
    r = await sb.exec(STATE)
    assert r.exit_code == 0, r.stderr
    return r.stdout


@pytest.fixture(params=["auto", "rlimit"])
def make(request: pytest.FixtureRequest) -> Callable[..., LocalSandbox]:
    """Sandboxes whose dir is a tmpfs (root-run "auto") or plain disk ("rlimit")."""
    return lambda spec=None: LocalSandbox(spec, limit_mode=request.param)


@pytest.fixture
async def prepared(make: Callable[..., LocalSandbox]) -> AsyncIterator[LocalSandbox]:
    sb = make()
    await sb.start()
    r = await sb.exec(SETUP)
    assert r.exit_code == 0, r.stderr
    yield sb
    await sb.stop()


async def test_snapshot_freezes_files_and_the_sandbox_goes_on(prepared: LocalSandbox) -> None:
    sb = prepared
    before = await state(sb)
    snap = await sb.snapshot()
    assert Capability.SNAPSHOT in sb.capabilities and snap.backend == "local"
    assert snap.changed_paths > 0 and snap.size_bytes >= len("one") + len("deep")
    assert [str(p) for p in sb._stack.layers] == snap.metadata["layers"] == snap.ref.split(":")
    # Same object, still usable; processes were not carried over; the diff restarted empty.
    assert host_processes_with("sleep 4321") == []
    assert await state(sb) == before
    assert not any((sb.diff_dir / "_root" / "workspace").iterdir())
    r = await sb.exec("printf later > /workspace/later; printf two > /workspace/a; rm /workspace/d/e/f; pwd")
    assert r.stdout.strip() == "/workspace"
    assert sorted(p.name for p in (sb.diff_dir / "_root" / "workspace").iterdir()) == ["a", "d", "later"]
    restored = LocalSandbox.from_snapshot(snap, sb.spec)
    async with restored:
        assert await state(restored) == before  # nothing written after the snapshot
        assert (await restored.exec("cat /workspace/a")).stdout == "one"
    shown = before.splitlines()
    assert "workspace/link lrwxrwxrwx 0 0 a" in shown
    assert "workspace/mode -rwsr-x--x 0 0 " in shown
    assert "workspace/d/e/f -rw-r----- 0 0 " in shown
    assert "links workspace/a 2" in shown and "links workspace/hard 2" in shown
    if ROOT:
        assert "workspace/owned -rw-r--r-- 1000 1001 " in shown
    assert "hostname-absent" in shown and shown[-1] == "1"  # deleted stays deleted; /etc/opt replaced


async def test_snapshot_refuses_while_a_command_runs(prepared: LocalSandbox) -> None:
    running = asyncio.ensure_future(prepared.exec("sleep 0.5; echo done"))
    await asyncio.sleep(0.1)
    with pytest.raises(SandboxError, match="command"):
        await prepared.snapshot()
    assert (await running).stdout == "done\n"
    snap = await prepared.snapshot()
    assert snap.changed_paths > 0


async def test_four_forks_never_see_each_other(prepared: LocalSandbox) -> None:
    snap = await prepared.snapshot()
    forks = [LocalSandbox.from_snapshot(snap, prepared.spec) for _ in range(4)]
    await asyncio.gather(*(f.start() for f in forks))
    try:
        for i, fork in enumerate(forks):
            r = await fork.exec(
                f"printf {i} > /workspace/branch-{i}; printf {i} > /workspace/a; rm /workspace/hard"
            )
            assert r.exit_code == 0, r.stderr
        for i, fork in enumerate(forks):
            r = await fork.exec("ls /workspace; cat /workspace/a")
            names = r.stdout.split()
            assert f"branch-{i}" in names and "hard" not in names and names[-1] == str(i)
            assert not any(n.startswith("branch-") and n != f"branch-{i}" for n in names)
        assert (await prepared.exec("cat /workspace/a")).stdout == "one"
    finally:
        await asyncio.gather(*(f.stop() for f in forks))


async def test_a_chain_of_snapshots_stacks_layers_and_discard_waits_for_users(prepared: LocalSandbox) -> None:
    first = await prepared.snapshot()
    await prepared.exec("printf second > /workspace/second; rm /workspace/a")
    second = await prepared.snapshot()
    layers = second.metadata["layers"]
    assert len(layers) == 2 and layers[1] == first.ref and second.ref == ":".join(layers)
    await LocalSandbox.discard_snapshot(first)
    assert Path(first.ref).is_dir()  # the second snapshot still needs it
    fork = LocalSandbox.from_snapshot(second, prepared.spec)
    async with fork:
        r = await fork.exec("ls /workspace")
        assert "second" in r.stdout.split() and "a" not in r.stdout.split() and "hard" in r.stdout.split()
        await LocalSandbox.discard_snapshot(second)
        assert all(Path(p).is_dir() for p in layers)  # the fork and the sandbox still run on them
    with pytest.raises(SandboxError, match="was discarded"):
        LocalSandbox.from_snapshot(first, prepared.spec)
    await prepared.stop()
    assert not any(Path(p).exists() for p in layers)
    assert not any(str(p) in layers for p in local_snapshot.live_layers())


async def test_an_upper_on_another_filesystem_is_copied(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_snapshot, "_same_filesystem", lambda a, b: False)
    monkeypatch.setattr(local_snapshot, "_may_mount", lambda: False)
    sb = LocalSandbox(limit_mode="rlimit")
    await sb.start()
    try:
        assert (await sb.exec(SETUP)).exit_code == 0
        before = await state(sb)
        snap = await sb.snapshot()
        assert not os.path.ismount(snap.ref)
        assert not any((sb.diff_dir / "_root" / "workspace").iterdir())
        assert await state(sb) == before
        async with LocalSandbox.from_snapshot(snap, sb.spec) as restored:
            assert await state(restored) == before
    finally:
        await sb.stop()
    await LocalSandbox.discard_snapshot(snap)
    assert not Path(snap.ref).exists()


async def test_refused_snapshots(prepared: LocalSandbox, tmp_path: Path) -> None:
    snap = await prepared.snapshot()
    other_image = dataclasses.replace(snap, image="sha256:" + "0" * 64)
    with pytest.raises(SandboxError, match="another image"):
        await LocalSandbox.from_snapshot(other_image, prepared.spec).start()
    with pytest.raises(SandboxError, match="docker backend"):
        LocalSandbox.from_snapshot(dataclasses.replace(snap, backend="docker"), prepared.spec)
    forged = FilesystemSnapshot("x", "local", snap.image, "/etc", metadata={"layers": ["/etc"]})
    with pytest.raises(SandboxError, match="not one this process holds"):
        LocalSandbox.from_snapshot(forged, prepared.spec)
    frozen = await prepared.fork_frozen()
    async with frozen:
        with pytest.raises(SandboxError, match="cannot be snapshotted"):
            await frozen.snapshot()
    layer = Path(snap.ref)
    if os.path.ismount(layer):  # bind-mounted out of the sandbox's tmpfs: cannot be moved away
        return
    hidden = tmp_path / "moved"
    layer.rename(hidden)
    try:
        with pytest.raises(SandboxError, match="missing"):
            LocalSandbox.from_snapshot(snap, prepared.spec)
    finally:
        hidden.rename(layer)


async def test_verifier_and_commit_see_changes_made_before_a_snapshot(
    prepared: LocalSandbox, tmp_path: Path
) -> None:
    sb = prepared
    await sb.exec("printf forged > /usr/bin/forged-tool; printf out > /workspace/result")
    await sb.snapshot()
    await sb.exec("printf after > /workspace/after; printf late > /opt/late; rm /workspace/a")
    fork = await sb.fork_verifier(outputs=["/workspace"])
    async with fork.sandbox:
        r = await fork.sandbox.exec(
            "ls /workspace; test -e /usr/bin/forged-tool && echo forged || echo clean; "
            "ls /opt; cat /etc/opt/only"
        )
    names = r.stdout.split()
    assert {"result", "after", "hard", "link", "d"} <= set(names) and "a" not in names
    assert "clean" in names and "late" not in names and "tool" not in names  # only the outputs carried
    assert "/usr/bin/forged-tool" in fork.outside.paths and "/opt/late" in fork.outside.paths
    assert "/etc/hostname (deleted)" in fork.outside.paths and "/etc/opt (replaced)" in fork.outside.paths
    assert not any(p.startswith("/workspace") for p in fork.outside.paths)
    full = await sb.fork_verifier(outputs=None)
    async with full.sandbox:
        r = await full.sandbox.exec("cat /usr/bin/forged-tool /opt/late /workspace/after")
        assert r.stdout == "forgedlateafter"
    dest = tmp_path / "layer"
    committed_plan = sb._stack.image
    await sb.commit(dest)
    assert committed_plan is not None
    image = LocalSandbox(plan=committed_plan.stacked_on(dest))
    async with image:
        r = await image.exec(
            "cat /usr/bin/forged-tool /opt/late /workspace/result; ls /workspace; cat /etc/hostname"
        )
        assert r.stdout.startswith("forgedlateout") and "a\n" not in r.stdout and r.exit_code != 0


async def test_export_then_import_in_a_new_process(prepared: LocalSandbox, tmp_path: Path) -> None:
    snap = await prepared.snapshot()
    expected = await state(prepared)
    archive = tmp_path / "archive"
    await LocalSandbox.export_snapshot(snap, archive)
    manifest = json.loads((archive / "manifest.json").read_text())
    assert manifest["format"] == ARCHIVE_FORMAT and manifest["image"] == snap.image
    assert manifest["counts"]["whiteouts"] >= 1 and manifest["counts"]["opaque_dirs"] >= 1
    assert manifest["counts"]["hardlinks"] == 1 and manifest["counts"]["symlinks"] == 1
    with tarfile.open(archive / "diff.tar.gz") as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert "etc/.wh.hostname" in members and "etc/opt/.wh..wh..opq" in members
    assert members["workspace/hard"].islnk() or members["workspace/a"].islnk()
    assert members["workspace/link"].issym() and members["workspace/link"].linkname == "a"
    if ROOT:
        assert (members["workspace/owned"].uid, members["workspace/owned"].gid) == (1000, 1001)
    program = textwrap.dedent(
        """
        import asyncio, sys
        from pathlib import Path
        from ares.sandbox.base import SandboxSpec
        from ares.sandbox.local import LocalSandbox

        async def main():
            snap = await LocalSandbox.import_snapshot(Path(sys.argv[1]), SandboxSpec())
            async with LocalSandbox.from_snapshot(snap, SandboxSpec()) as sb:
                r = await sb.exec(sys.argv[2])
            print(r.stdout, end="")

        asyncio.run(main())
        """
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", program, str(archive), STATE],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == expected


def _archive(
    dest: Path, members: list[tuple[tarfile.TarInfo, bytes | None]], image: str, **manifest: object
) -> Path:
    """A hand-made archive dir with a valid manifest (unless overridden) for ``members``."""
    dest.mkdir()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    (dest / "diff.tar.gz").write_bytes(buffer.getvalue())
    body = {
        "format": ARCHIVE_FORMAT,
        "backend": "local",
        "image": image,
        "diff": {"name": "diff.tar.gz", "sha256": hashlib.sha256(buffer.getvalue()).hexdigest()},
        **manifest,
    }
    (dest / "manifest.json").write_text(json.dumps(body))
    return dest


def _info(name: str, kind: bytes = tarfile.REGTYPE, **fields: object) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = 0o644
    for key, value in fields.items():
        setattr(info, key, value)
    return info


HOSTILE: dict[str, tuple[list[tuple[tarfile.TarInfo, bytes | None]], str]] = {
    "absolute": ([(_info("/etc/evil"), b"x")], "absolute"),
    "dotdot": ([(_info("workspace/../../evil"), b"x")], "plain relative"),
    "through a symlink": (
        [(_info("workspace/esc", tarfile.SYMTYPE, linkname="/"), None), (_info("workspace/esc/evil"), b"x")],
        "not a directory",
    ),
    "hard link outside": (
        [(_info("workspace/pw", tarfile.LNKTYPE, linkname="etc/passwd"), None)],
        "hard link",
    ),
    "hard link dotdot": (
        [(_info("workspace/pw", tarfile.LNKTYPE, linkname="../../etc/shadow"), None)],
        "plain",
    ),
    "device": ([(_info("workspace/mem", tarfile.CHRTYPE, devmajor=1, devminor=1), None)], "device"),
    "bad whiteout": ([(_info("workspace/.wh.x"), b"not empty")], "whiteout"),
    "whiteout of a mount": ([(_info(".wh.usr"), b"")], "mount point"),
    "huge id": ([(_info("workspace/f", uid=1 << 20), b"x")], "outside the sandbox"),
    "twice": ([(_info("workspace/f"), b"a"), (_info("workspace/f"), b"b")], "twice"),
    "symlink climbing out": (
        [(_info("workspace/up", tarfile.SYMTYPE, linkname="../../../etc"), None)],
        "above /",
    ),
    "file as dir": ([(_info("workspace/f"), b"a"), (_info("workspace/f/g"), b"b")], "not a directory"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
async def test_hostile_archives_are_refused(case: str, tmp_path: Path) -> None:
    sb = LocalSandbox()
    await sb.start()
    snap = await sb.snapshot()
    await sb.stop()
    await LocalSandbox.discard_snapshot(snap)
    members, why = HOSTILE[case]
    archive = _archive(tmp_path / "a", members, snap.image)
    before = set(local_snapshot.snapshots_dir().iterdir())
    with pytest.raises(SandboxError, match=why):
        await LocalSandbox.import_snapshot(archive, SandboxSpec())
    assert set(local_snapshot.snapshots_dir().iterdir()) == before  # nothing half-written is left
    assert not Path("/evil").exists()


async def test_corrupt_or_foreign_archives_are_refused(tmp_path: Path) -> None:
    sb = LocalSandbox()
    await sb.start()
    await sb.exec("printf data > /workspace/f; ln -s ../../../../etc /workspace/up; touch /workspace/.wh.x")
    snap = await sb.snapshot()
    good = tmp_path / "good"
    await LocalSandbox.export_snapshot(snap, good)
    await sb.stop()
    skipped = json.loads((good / "manifest.json").read_text())["skipped"]
    assert skipped["count"] == 2 and any("/workspace/up" in p for p in skipped["paths"])
    with pytest.raises(SandboxError, match="already holds"):
        await LocalSandbox.export_snapshot(snap, good)

    def variant(name: str, change: Callable[[Path], None]) -> Path:
        path = tmp_path / name
        shutil.copytree(good, path)
        change(path)
        return path

    def manifest_with(**fields: object) -> Callable[[Path], None]:
        def edit(path: Path) -> None:
            data = json.loads((path / "manifest.json").read_text())
            (path / "manifest.json").write_text(json.dumps({**data, **fields}))

        return edit

    def flip(path: Path) -> None:
        data = bytearray((path / "diff.tar.gz").read_bytes())
        data[len(data) // 2] ^= 0xFF
        (path / "diff.tar.gz").write_bytes(bytes(data))

    def garbage(path: Path) -> None:
        data = os.urandom(4096)
        (path / "diff.tar.gz").write_bytes(data)
        manifest_with(diff={"name": "diff.tar.gz", "sha256": hashlib.sha256(data).hexdigest()})(path)

    cases = {
        "corrupt": (flip, "corrupt"),
        "garbage with a matching checksum": (garbage, "refusing the snapshot archive"),
        "version": (manifest_with(format="ares.fs-snapshot/99"), "format 'ares.fs-snapshot/99'"),
        "backend": (manifest_with(backend="docker"), "docker"),
        "image": (manifest_with(image="sha256:" + "1" * 64), "another image"),
        "no manifest": (lambda p: (p / "manifest.json").unlink(), "manifest.json is missing"),
        "not json": (lambda p: (p / "manifest.json").write_text("{"), "not valid JSON"),
    }
    for name, (change, why) in cases.items():
        with pytest.raises(SandboxError, match=why):
            await LocalSandbox.import_snapshot(variant(name, change), SandboxSpec())
    imported = await LocalSandbox.import_snapshot(good, SandboxSpec())
    async with LocalSandbox.from_snapshot(imported, SandboxSpec()) as restored:
        assert (await restored.read_file("/workspace/f")) == b"data"
    await LocalSandbox.discard_snapshot(imported)
    await LocalSandbox.discard_snapshot(snap)


def test_layer_writer_never_writes_through_what_it_made(tmp_path: Path) -> None:
    writer = LayerWriter(tmp_path / "layer")
    writer.symlink("_root/esc", str(tmp_path), 0, 0, 0.0)
    with pytest.raises(UnsafeEntry):
        writer.file("_root/esc/evil", 0o644, os.geteuid(), os.getegid(), 0.0, io.BytesIO(b"x"), 1)
    with pytest.raises(UnsafeEntry):
        writer.directory("_root/esc", 0o755, os.geteuid(), os.getegid(), 0.0)
    assert not (tmp_path / "evil").exists()


async def test_warm_pool_forwards_the_snapshot_factory() -> None:
    async with WarmPool(LocalSandbox, size=1) as pool:
        assert pool.capabilities == {Capability.RESTORE}
        async with pool(SandboxSpec()) as sb:
            await sb.exec("printf pooled > /workspace/p")
            snap = await sb.snapshot()
        fork = pool.from_snapshot(snap, SandboxSpec())
        async with fork:
            assert (await fork.read_file("/workspace/p")) == b"pooled"
        await pool.discard_snapshot(snap)
    bare = WarmPool(lambda spec: LocalSandbox(spec))  # a plain function declares nothing
    assert bare.capabilities == frozenset()
    with pytest.raises(CapabilityError, match="restore"):
        bare.from_snapshot(snap, SandboxSpec())


async def test_nothing_is_left_after_everything_stops() -> None:
    sb = LocalSandbox()
    await sb.start()
    await sb.exec("printf x > /workspace/x; (sleep 4322 >/dev/null 2>&1 &)")
    snap = await sb.snapshot()
    await sb.exec("(sleep 4322 >/dev/null 2>&1 &)")
    forks = [LocalSandbox.from_snapshot(snap, SandboxSpec()) for _ in range(3)]
    await asyncio.gather(*(f.start() for f in forks))
    await asyncio.gather(*(f.exec("(sleep 4322 >/dev/null 2>&1 &)") for f in forks))
    dirs = [sb.diff_dir.parent, *(f.diff_dir.parent for f in forks)]
    pids = [p for s in (sb, *forks) for p in s._pids]
    await asyncio.gather(sb.stop(), *(f.stop() for f in forks))
    await LocalSandbox.discard_snapshot(snap)
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert host_processes_with("sleep 4322") == []
    assert not any(d.exists() for d in dirs) and not Path(snap.ref).exists()
    assert mounts_below(Path(snap.ref)) == [] and not any(mounts_below(d) for d in dirs)
    assert str(snap.ref) not in map(str, local_snapshot.live_layers())


FLOW = textwrap.dedent(
    """
    import asyncio, json, os, subprocess, sys
    from pathlib import Path
    from ares.errors import SandboxError
    from ares.sandbox.base import SandboxSpec
    from ares.sandbox.local import LocalSandbox, workspace

    SETUP, STATE, IMPORT = json.loads(sys.argv[1])

    async def main():
        out = {"uid": os.getuid()}
        sb = LocalSandbox()
        await sb.start()
        out["setup"] = (await sb.exec(SETUP)).exit_code
        out["before"] = (await sb.exec(STATE)).stdout
        snap = await sb.snapshot()
        await sb.exec("printf later > /workspace/later")
        forks = [LocalSandbox.from_snapshot(snap, SandboxSpec()) for _ in range(4)]
        await asyncio.gather(*(f.start() for f in forks))
        out["fork_state"] = [(await f.exec(STATE)).stdout for f in forks]
        for i, f in enumerate(forks):
            await f.exec(f"printf {i} > /workspace/mine-{i}")
        out["fork_ls"] = [(await f.exec("ls /workspace")).stdout.split() for f in forks]
        archive = Path(sys.argv[2])
        await LocalSandbox.export_snapshot(snap, archive)
        argv = [sys.executable, "-c", IMPORT, str(archive), STATE]
        child = subprocess.run(argv, capture_output=True, text=True)
        out["imported"], out["import_err"] = child.stdout, child.stderr[-2000:]
        hostile = archive.parent / "hostile"
        hostile.mkdir()
        old = {"format": "ares.fs-snapshot/0", "backend": "local"}
        (hostile / "manifest.json").write_text(json.dumps(old))
        try:
            await LocalSandbox.import_snapshot(hostile, SandboxSpec())
            out["hostile"] = "accepted"
        except SandboxError as exc:
            out["hostile"] = str(exc)
        await asyncio.gather(sb.stop(), *(f.stop() for f in forks))
        await LocalSandbox.discard_snapshot(snap)
        proc_dir = workspace.process_dir()
        left = [p.relative_to(proc_dir) for p in proc_dir.rglob("*")]
        out["left"] = sorted(str(p) for p in left if "host-base" not in p.parts)
        mountinfo = Path("/proc/self/mountinfo").read_text().splitlines()
        out["mounts"] = [line for line in mountinfo if str(proc_dir) in line]
        return out

    print(json.dumps(asyncio.run(main())))
    """
)

IMPORT = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from ares.sandbox.base import SandboxSpec
    from ares.sandbox.local import LocalSandbox

    async def main():
        snap = await LocalSandbox.import_snapshot(Path(sys.argv[1]), SandboxSpec())
        async with LocalSandbox.from_snapshot(snap, SandboxSpec()) as sb:
            print((await sb.exec(sys.argv[2])).stdout, end="")

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("who", ["root", "nobody"])
def test_flow_as(who: str) -> None:
    if who == "root" and not ROOT:
        pytest.skip("needs the suite to run as root")
    if who == "nobody" and ROOT and nobody_python() is None:
        pytest.skip(SKIP_REASON)
    base = Path(tempfile.mkdtemp(prefix="ares-snap-"))
    try:
        uid = 65534 if who == "nobody" and ROOT else os.geteuid()
        os.chmod(base, 0o755)
        os.chown(base, uid, uid)
        env = {
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": f"{SRC}:{sysconfig.get_paths()['purelib']}",
            "ARES_SANDBOX_DIR": str(base / "state"),
            "TMPDIR": str(base),
        }
        python = sys.executable
        cmd = [python, "-c", FLOW, json.dumps([SETUP, STATE, IMPORT]), str(base / "archive")]
        if who == "nobody" and ROOT:
            cmd = [*DROP, str(nobody_python()), *cmd[1:]]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=180, cwd=base)
        assert proc.returncode == 0, proc.stderr[-4000:]
        seen = json.loads(proc.stdout.strip().splitlines()[-1])
        assert seen["uid"] == uid and seen["setup"] == 0
        assert all(s == seen["before"] for s in seen["fork_state"])
        assert seen["imported"] == seen["before"], seen["import_err"]
        assert "hostname-absent" in seen["before"] and "workspace/link lrwxrwxrwx 0 0 a" in seen["before"]
        for i, names in enumerate(seen["fork_ls"]):
            assert f"mine-{i}" in names and "later" not in names
            assert not any(n.startswith("mine-") and n != f"mine-{i}" for n in names)
        assert "format 'ares.fs-snapshot/0'" in seen["hostile"]
        assert seen["left"] == ["sandboxes", "snapshots"] and seen["mounts"] == []
    finally:
        janitor.remove_tree(base)


VERIFY_SH = """\
{ echo "$(head -c 40 /usr/bin/python3 | tr -d '\\0' | head -1)"
  cat /etc/extra.conf 2>/dev/null || echo absent; } > /logs/verifier/test-output.txt
[ "$(cat solution.txt)$(cat later.txt)" = rightlater ] && echo 1 > /logs/verifier/reward.txt \
  || echo 0 > /logs/verifier/reward.txt
"""


async def test_verify_after_a_snapshot_carries_the_outputs_written_before_it() -> None:
    from ares.tasks.model import Task
    from ares.tasks.verifier import verify

    task = Task(id="snap", instruction="-", tests={"test.sh": VERIFY_SH})
    sb = LocalSandbox(task.sandbox_spec())
    await sb.start()
    try:
        await sb.exec(
            "echo right > solution.txt && echo planted > /etc/extra.conf"
            " && printf '#!/bin/sh\\necho 1 > /logs/verifier/reward.txt\\n' > /usr/bin/python3"
        )
        await sb.snapshot()
        await sb.exec("echo later > later.txt")
        verdict = await verify(task, sb)
        assert verdict.reward == 1.0 and verdict.mode == "outputs"
        report = verdict.files.files["test-output.txt"].splitlines()
        assert "ELF" in report[0] and report[1] == "absent"  # the image's python3, no /etc change
        assert verdict.outside is not None and "/etc/extra.conf" in verdict.outside.paths
        assert any(p.startswith("/usr/bin/python3") for p in verdict.outside.paths)
    finally:
        await sb.stop()
