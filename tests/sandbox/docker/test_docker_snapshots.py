"""Snapshots of docker sandboxes against a real engine (podman here): commit mid-episode, restore,
fork, export to a directory and import it back (in another process), discard; hostile archives."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
import tarfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import docker
import pytest
from docker_engine_kit import Engine

from ares.errors import SandboxError
from ares.sandbox import ImageSpec, SandboxSpec
from ares.sandbox.capabilities import Capability
from ares.sandbox.docker import DockerSandbox, DockerSandboxFactory, snapshot_export
from ares.sandbox.docker import snapshot as docker_snapshot
from ares.sandbox.docker.janitor import OWNER_PID_LABEL
from ares.sandbox.docker.snapshot import SNAPSHOT_LABEL, merge_changes
from ares.sandbox.docker.snapshot_archive import ArchiveError, MemberCheck
from ares.sandbox.snapshots import ARCHIVE_FORMAT, FilesystemSnapshot

SPEC = SandboxSpec()
#: A background loop the tests start, and how to find it (the image has no ps or pgrep).
LOOP = "setsid sh -c 'while :; do sleep 0.05; done' </dev/null >/dev/null 2>&1 &"
LOOP_RUNS = (
    "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done 2>/dev/null | grep -q 'do slee[p] 0.05'"
)
#: What the tests compare: these roots, every entry's type, mode, owner and link target, and every
#: regular file's hash (mtimes differ between a sandbox and its restore; directories' sizes too).
ROOTS = "/workspace /srv /opt /usr/share/doc/apt /etc/issue /etc/issue.net /etc/motd"
LISTING = (
    f"find {ROOTS} -printf '%p|%y|%m|%U:%G|%l\\n' 2>/dev/null | sort; "
    f"find {ROOTS} -type f -exec sha256sum {{}} + 2>/dev/null | sort"
)
#: Changes of every kind: new files and dirs (a script 0751, a setuid file, an owner), symlinks
#: (relative, absolute, dangling), a hard link, deletions (a file; a dir replaced by a new one),
#: a file turned into a symlink, a base dir's mode and owner, a FIFO, a big random file.
WRITES = """
set -e
mkdir -p /workspace/pkg/sub /opt/tool
printf 'print(1)\\n' > /workspace/pkg/main.py
printf '#!/bin/sh\\necho hi\\n' > /workspace/run.sh && chmod 751 /workspace/run.sh
echo secret > /workspace/pkg/sub/owned
chown 1234:55 /workspace/pkg/sub/owned && chmod 640 /workspace/pkg/sub/owned
echo s > /opt/tool/suid && chmod 4755 /opt/tool/suid
ln -s pkg/main.py /workspace/rel-link && ln -s /etc/hostname /workspace/abs-link
ln -s /nowhere /workspace/dangling
ln /workspace/pkg/main.py /workspace/hard
rm /etc/issue
rm -rf /usr/share/doc/apt && mkdir /usr/share/doc/apt && echo new > /usr/share/doc/apt/only
rm /etc/issue.net && ln -s /etc/hostname /etc/issue.net
chown 7:7 /srv && chmod 700 /srv
echo changed >> /etc/motd
mkfifo /workspace/fifo
head -c 300000 /dev/urandom > /workspace/blob.bin
"""


@pytest.fixture
def leftovers(docker_client: docker.DockerClient) -> Iterator[None]:
    """After the test: no container of this process and no snapshot image it owns are left."""
    yield
    mine = f"{OWNER_PID_LABEL}={os.getpid()}"
    containers = docker_client.api.containers(all=True, filters={"label": mine})
    snapshots = docker_client.api.images(all=True, filters={"label": f"{SNAPSHOT_LABEL}=1"})
    images = [i for i in snapshots if (i.get("Labels") or {}).get(OWNER_PID_LABEL) == str(os.getpid())]
    assert containers == [], "containers left behind"
    assert images == [], "snapshot images left behind"


@pytest.fixture
async def written(factory: DockerSandboxFactory, leftovers: None) -> AsyncIterator[DockerSandbox]:
    """A started sandbox with WRITES done."""
    sandbox = factory(SPEC)
    await sandbox.start()
    try:
        result = await sandbox.exec(WRITES, cwd="/")
        assert result.ok, result.stderr
        yield sandbox
    finally:
        await sandbox.stop()


async def listing(sandbox: DockerSandbox) -> str:
    result = await sandbox.exec(LISTING, cwd="/")
    assert result.stdout.strip(), result.stderr
    return result.stdout


async def restored(factory: DockerSandboxFactory, snapshot: FilesystemSnapshot) -> DockerSandbox:
    sandbox = factory.from_snapshot(snapshot, SPEC)
    await sandbox.start()
    return sandbox


def test_the_factory_implements_the_seam(factory: DockerSandboxFactory) -> None:
    assert Capability.RESTORE in factory.capabilities


async def test_a_snapshot_holds_its_moment_and_the_sandbox_goes_on(
    factory: DockerSandboxFactory, written: DockerSandbox, docker_client: docker.DockerClient
) -> None:
    await written.exec(LOOP)
    assert (await written.exec(LOOP_RUNS)).ok
    before = await listing(written)
    snapshot = await written.snapshot()
    try:
        assert snapshot.backend == "docker" and snapshot.changed_paths >= 12
        assert snapshot.image == docker_client.api.inspect_image("localhost/ares-debian:bookworm")["Id"]
        labels = docker_client.api.inspect_image(snapshot.ref)["Config"]["Labels"]
        assert labels["ares.frozen"] == "1" and labels[OWNER_PID_LABEL] == str(os.getpid())
        json.dumps(snapshot.to_dict())  # the env snapshot stores it as JSON
        # The sandbox goes on, with its processes, and writes after the snapshot stay its own.
        assert (await written.exec(LOOP_RUNS)).ok
        later = await written.exec("echo later > /workspace/later && echo more >> /workspace/pkg/main.py "
                                   "&& rm /workspace/run.sh && rm /etc/debian_version")  # fmt: skip
        assert later.ok, later.stderr
        copy = await restored(factory, snapshot)
        try:
            assert await listing(copy) == before
            assert (await copy.exec("/workspace/run.sh")).stdout == "hi\n"
            assert not (await copy.exec("test -e /workspace/later")).ok
            assert (await copy.exec("test -e /etc/debian_version")).ok
            assert (await copy.exec("test -p /workspace/fifo && test -u /opt/tool/suid")).ok
            assert (await copy.exec("stat -c %h /workspace/hard")).stdout.strip() == "2"
            # Processes are not captured.
            assert not (await copy.exec(LOOP_RUNS)).ok
        finally:
            await copy.stop()
        assert (await written.exec("cat /workspace/later")).stdout == "later\n"
    finally:
        await factory.discard_snapshot(snapshot)


async def test_four_forks_never_see_each_others_files(
    factory: DockerSandboxFactory, written: DockerSandbox
) -> None:
    snapshot = await written.snapshot()
    forks = [factory.from_snapshot(snapshot, SPEC) for _ in range(4)]
    try:
        started = time.monotonic()
        await asyncio.gather(*(fork.start() for fork in forks))
        print(f"fork(4) started in {time.monotonic() - started:.3f}s")
        for i, fork in enumerate(forks):
            wrote = await fork.exec(f"echo {i} > /workspace/branch-{i} && echo {i} >> /workspace/pkg/main.py "
                                    f"&& rm /workspace/rel-link")  # fmt: skip
            assert wrote.ok, wrote.stderr
        for i, fork in enumerate(forks):
            seen = (await fork.exec("ls /workspace | grep branch; tail -n 1 /workspace/pkg/main.py")).stdout
            assert seen.split() == [f"branch-{i}", str(i)]
        assert (await written.exec("test -e /workspace/rel-link && ! ls /workspace/branch-*")).ok
    finally:
        await asyncio.gather(*(fork.stop() for fork in forks))
        await factory.discard_snapshot(snapshot)


CHILD = """
import asyncio, json, sys
from pathlib import Path
from ares.sandbox import SandboxSpec
from ares.sandbox.docker import DockerConfig, DockerSandboxFactory

async def main():
    factory = DockerSandboxFactory(DockerConfig(base_url=sys.argv[1]))
    snapshot = await factory.import_snapshot(Path(sys.argv[2]), SandboxSpec())
    sandbox = factory.from_snapshot(snapshot, SandboxSpec())
    await sandbox.start()
    try:
        listing = await sandbox.exec(sys.argv[3], cwd="/")
    finally:
        await sandbox.stop()
        await factory.discard_snapshot(snapshot)
    print(json.dumps({"listing": listing.stdout, "snapshot": snapshot.to_dict()}))

asyncio.run(main())
"""


async def test_export_then_import_in_a_new_process_restores_identical_files(
    factory: DockerSandboxFactory, written: DockerSandbox, docker_engine: Engine, tmp_path: Path
) -> None:
    before = await listing(written)
    snapshot = await written.snapshot()
    try:
        await factory.export_snapshot(snapshot, tmp_path / "fs")
        with pytest.raises(SandboxError, match="already holds a snapshot archive"):
            await factory.export_snapshot(snapshot, tmp_path / "fs")
    finally:
        await factory.discard_snapshot(snapshot)
    manifest = json.loads((tmp_path / "fs" / "manifest.json").read_text())
    assert manifest["format"] == ARCHIVE_FORMAT and manifest["backend"] == "docker"
    assert (
        manifest["image"] == snapshot.image and manifest["reader"] == "tar" and manifest["ids"] == "sandbox"
    )
    assert manifest["snapshot"] == snapshot.id and manifest["changed_paths"] == snapshot.changed_paths
    assert manifest["counts"]["whiteouts"] == 1 and manifest["counts"]["opaque_dirs"] == 1
    assert manifest["counts"]["content_bytes"] >= 300_000 and manifest["skipped"]["count"] == 0
    # Only the diff: far smaller than the image, about the size of the random blob.
    assert manifest["diff"]["bytes"] < 400_000
    with tarfile.open(tmp_path / "fs" / "diff.tar.gz") as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert "etc/.wh.issue" in members and "usr/share/doc/apt/.wh..wh..opq" in members
    assert members["workspace/pkg/sub/owned"].uid == 1234 and members["workspace/pkg/sub/owned"].gid == 55
    assert members["workspace/rel-link"].linkname == "pkg/main.py"
    assert members["workspace/hard"].islnk() or members["workspace/pkg/main.py"].islnk()
    assert not any(name.startswith("usr/bin") or name.startswith("tmp/.ares-exec") for name in members)
    assert all(m.uname == "" and m.gname == "" for m in members.values())

    child = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", CHILD, docker_engine.base_url, str(tmp_path / "fs"), LISTING],
        capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert child.returncode == 0, child.stderr[-3000:]
    result = json.loads(child.stdout.strip().splitlines()[-1])
    assert result["listing"] == before
    assert result["snapshot"]["metadata"]["source_id"] == snapshot.id


async def test_a_snapshot_of_a_restored_sandbox_is_still_against_the_pristine_image(
    factory: DockerSandboxFactory, written: DockerSandbox, tmp_path: Path
) -> None:
    first = await written.snapshot()
    copy = await restored(factory, first)
    second: FilesystemSnapshot | None = None
    try:
        changed = await copy.exec(
            "rm -rf /workspace/pkg && echo back > /etc/issue && rm /srv -rf && echo x > /opt/tool/new "
            "&& rm -rf /opt/tool/suid"
        )
        assert changed.ok, changed.stderr
        expected = await listing(copy)
        second = await copy.snapshot()
        assert second.image == first.image  # the pristine image, not the first snapshot's
        changes = dict(docker_snapshot.changes_of(second) or [])
        assert "/workspace/pkg" not in changes and "/workspace/pkg/main.py" not in changes
        assert changes["/srv"] == 2 and changes["/etc/issue"] == 2  # deleted, then made again
        await factory.export_snapshot(second, tmp_path / "fs")
        imported = await factory.import_snapshot(tmp_path / "fs", SPEC)
        again = await restored(factory, imported)
        try:
            assert await listing(again) == expected
        finally:
            await again.stop()
            await factory.discard_snapshot(imported)
    finally:
        await copy.stop()
        if second is not None:
            await factory.discard_snapshot(second)
        await factory.discard_snapshot(first)


async def test_the_verifier_fork_of_a_restored_sandbox_compares_with_the_pristine_image(
    factory: DockerSandboxFactory, written: DockerSandbox
) -> None:
    snapshot = await written.snapshot()
    copy = await restored(factory, snapshot)
    try:
        assert (await copy.exec("echo out > /workspace/out.txt")).ok
        fork = await copy.fork_outputs(["/workspace/out.txt"])
        try:
            outside = set(fork.outside.paths)
            assert "/etc/issue (deleted)" in outside and "/opt/tool/suid" in outside
            # The fork starts from the pristine image: nothing the agent did outside its outputs.
            assert (await fork.sandbox.exec("test -e /etc/issue && ! test -e /opt/tool/suid")).ok
            assert (await fork.sandbox.read_file("/workspace/out.txt")) == b"out\n"
        finally:
            await fork.sandbox.stop()
    finally:
        await copy.stop()
        await factory.discard_snapshot(snapshot)


async def test_export_without_the_containers_tar_goes_path_by_path(
    factory: DockerSandboxFactory, written: DockerSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An image without GNU tar: one archive API call per path, owners and links from find."""
    monkeypatch.setattr(snapshot_export.DiffWriter, "_with_tar", lambda *args: False)
    before = await listing(written)
    snapshot = await written.snapshot()
    try:
        await factory.export_snapshot(snapshot, tmp_path / "fs")
    finally:
        await factory.discard_snapshot(snapshot)
    manifest = json.loads((tmp_path / "fs" / "manifest.json").read_text())
    assert manifest["reader"] == "archive-api" and manifest["ids"] == "sandbox"
    imported = await factory.import_snapshot(tmp_path / "fs", SPEC)
    copy = await restored(factory, imported)
    try:
        assert await listing(copy) == before
    finally:
        await copy.stop()
        await factory.discard_snapshot(imported)


async def test_export_without_a_find_listing_keeps_contents_and_links(
    factory: DockerSandboxFactory, written: DockerSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An image without GNU find: the engine's stat and archives describe the files instead (on
    Podman: every owner root, a top-level symlink's target resolved to an absolute path)."""
    monkeypatch.setattr(snapshot_export, "start_and_list", lambda *args: None)
    snapshot = await written.snapshot()
    try:
        await factory.export_snapshot(snapshot, tmp_path / "fs")
    finally:
        await factory.discard_snapshot(snapshot)
    assert json.loads((tmp_path / "fs" / "manifest.json").read_text())["ids"] == "archive"
    imported = await factory.import_snapshot(tmp_path / "fs", SPEC)
    copy = await restored(factory, imported)
    try:
        same = "cmp /workspace/rel-link /workspace/pkg/main.py && test -L /workspace/abs-link"
        assert (await copy.exec(same)).ok and (await copy.exec("test -L /workspace/dangling")).ok
        assert not (await copy.exec("test -e /etc/issue || ls /usr/share/doc/apt | grep -v only")).ok
        assert (await copy.exec("test -L /etc/issue.net && test -u /opt/tool/suid")).ok
    finally:
        await copy.stop()
        await factory.discard_snapshot(imported)


async def test_a_file_replaced_by_a_directory(
    factory: DockerSandboxFactory, written: DockerSandbox, tmp_path: Path
) -> None:
    """Podman 4.3's diff fails on it: the snapshot restores, but export says why it cannot. An
    engine whose diff works exports and imports it like anything else."""
    assert (await written.exec("rm /etc/motd && mkdir /etc/motd && echo in > /etc/motd/x")).ok
    before = await listing(written)
    snapshot = await written.snapshot()
    try:
        copy = await restored(factory, snapshot)
        try:
            assert await listing(copy) == before
        finally:
            await copy.stop()
        if docker_snapshot.changes_of(snapshot) is None:
            assert snapshot.metadata["changes_error"]
            with pytest.raises(SandboxError, match="could not list its changes"):
                await factory.export_snapshot(snapshot, tmp_path / "fs")
            return
        await factory.export_snapshot(snapshot, tmp_path / "fs")
    finally:
        await factory.discard_snapshot(snapshot)
    imported = await factory.import_snapshot(tmp_path / "fs", SPEC)
    again = await restored(factory, imported)
    try:
        assert await listing(again) == before
    finally:
        await again.stop()
        await factory.discard_snapshot(imported)


async def test_discard_waits_for_the_last_sandbox_and_then_refuses_new_ones(
    factory: DockerSandboxFactory, written: DockerSandbox, docker_client: docker.DockerClient
) -> None:
    snapshot = await written.snapshot()
    copy = await restored(factory, snapshot)
    await factory.discard_snapshot(snapshot)
    docker_client.api.inspect_image(snapshot.ref)  # still used: kept
    assert (await copy.exec("cat /workspace/pkg/main.py")).ok
    with pytest.raises(SandboxError, match="discarded"):
        await factory.from_snapshot(snapshot, SPEC).start()
    await copy.stop()
    with pytest.raises(docker.errors.ImageNotFound):
        docker_client.api.inspect_image(snapshot.ref)
    with pytest.raises(SandboxError, match="gone"):
        await factory.from_snapshot(snapshot, SPEC).start()
    with pytest.raises(SandboxError, match="gone"):
        await factory.export_snapshot(snapshot, Path("/nonexistent/never-written"))


async def test_a_snapshot_restores_only_onto_its_own_image(
    factory: DockerSandboxFactory, written: DockerSandbox, python_slim: str, tmp_path: Path
) -> None:
    snapshot = await written.snapshot()
    other = SandboxSpec(image=ImageSpec(name=python_slim))
    try:
        with pytest.raises(SandboxError, match="restores only onto its own image"):
            await factory.from_snapshot(snapshot, other).start()
        await factory.export_snapshot(snapshot, tmp_path / "fs")
    finally:
        await factory.discard_snapshot(snapshot)
    with pytest.raises(ArchiveError, match="import it with the image it was taken on"):
        await factory.import_snapshot(tmp_path / "fs", other)
    local = FilesystemSnapshot(id="x", backend="local", image="plan", ref="/tmp/layer")
    with pytest.raises(SandboxError, match="'local' backend"):
        factory.from_snapshot(local, SPEC)
    manifest = json.loads((tmp_path / "fs" / "manifest.json").read_text())
    (tmp_path / "fs" / "manifest.json").write_text(json.dumps({**manifest, "backend": "local"}))
    with pytest.raises(ArchiveError, match="'local' backend"):
        await factory.import_snapshot(tmp_path / "fs", SPEC)
    (tmp_path / "fs" / "manifest.json").write_text(json.dumps({**manifest, "format": "ares.fs-snapshot/0"}))
    with pytest.raises(ArchiveError, match="format"):
        await factory.import_snapshot(tmp_path / "fs", SPEC)
    (tmp_path / "fs" / "manifest.json").write_text(json.dumps(manifest))
    with (tmp_path / "fs" / "diff.tar.gz").open("ab") as tail:
        tail.write(b"tampered")
    with pytest.raises(ArchiveError, match="checksum"):
        await factory.import_snapshot(tmp_path / "fs", SPEC)


# ------------------------------------------------------------------------------ hostile archives
def member(
    name: str, kind: bytes = tarfile.REGTYPE, data: bytes = b"", link: str = ""
) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.size, info.linkname = kind, len(data), link
    if kind == tarfile.DIRTYPE:
        info.mode = 0o755
    return info, data


HOSTILE = {
    "absolute name": [member("/etc/passwd", data=b"x")],
    "dot-dot": [member("workspace/../../etc/x", data=b"x")],
    "through a symlink": [
        member("workspace/out", tarfile.SYMTYPE, link="/etc"),
        member("workspace/out/passwd"),
    ],
    "relative link out": [member("workspace/up", tarfile.SYMTYPE, link="../../../../etc")],
    "hard link to a stranger": [member("workspace/h", tarfile.LNKTYPE, link="etc/shadow")],
    "hard link out": [member("workspace/h", tarfile.LNKTYPE, link="../etc/shadow")],
    "device": [member("workspace/null", tarfile.CHRTYPE)],
    "opaque root": [member(".wh..wh..opq")],
    "duplicate": [member("workspace/a", data=b"1"), member("workspace/a", data=b"2")],
    "whiteout with data": [member("etc/.wh.issue", data=b"x")],
}


def write_manifest(dest: Path, image: str) -> None:
    manifest = {
        "format": ARCHIVE_FORMAT,
        "backend": "docker",
        "image": image,
        "diff": {"name": "diff.tar.gz"},
    }
    (dest / "manifest.json").write_text(json.dumps(manifest))


def write_archive(dest: Path, members: list[tuple[tarfile.TarInfo, bytes]], image: str) -> Path:
    dest.mkdir()
    with tarfile.open(dest / "diff.tar.gz", "w:gz") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data))
    write_manifest(dest, image)
    return dest


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_member_check_refuses(case: str) -> None:
    check = MemberCheck()
    with pytest.raises(ArchiveError):
        for info, _ in HOSTILE[case]:
            check.check(info)


def test_member_check_accepts_what_an_export_holds() -> None:
    check = MemberCheck()
    entries = [
        member("workspace", tarfile.DIRTYPE), member("workspace/f", data=b"x"),
        member("workspace/abs", tarfile.SYMTYPE, link="/etc/hostname"),
        member("workspace/rel", tarfile.SYMTYPE, link="../etc/hostname"),
        member("workspace/h", tarfile.LNKTYPE, link="workspace/f"), member("workspace/p", tarfile.FIFOTYPE),
        member("workspace/habs", tarfile.LNKTYPE, link="workspace/abs"),
        member("etc/.wh.issue"), member("workspace/.wh..wh..opq"),
    ]  # fmt: skip
    kinds = [check.check(info) for info, _ in entries]
    assert kinds[-2:] == [("whiteout", "/etc/issue"), ("opaque", "/workspace")]
    assert check.counts.whiteouts == 1 and check.counts.symlinks == 2 and check.counts.hardlinks == 2


async def test_import_refuses_hostile_archives_before_touching_the_engine(
    factory: DockerSandboxFactory, docker_client: docker.DockerClient, tmp_path: Path, leftovers: None
) -> None:
    base = docker_client.api.inspect_image("localhost/ares-debian:bookworm")
    image = str(base["Id"])
    for i, case in enumerate(sorted(HOSTILE)):
        archive = write_archive(tmp_path / str(i), HOSTILE[case], image)
        with pytest.raises(ArchiveError, match="refusing the snapshot archive"):
            await factory.import_snapshot(archive, SPEC)
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "diff.tar.gz").write_bytes(b"not a tarball")
    write_manifest(tmp_path / "junk", image)
    with pytest.raises(ArchiveError, match="not a readable"):
        await factory.import_snapshot(tmp_path / "junk", SPEC)
    with pytest.raises(ArchiveError, match=r"manifest\.json is missing"):
        await factory.import_snapshot(tmp_path / "nothing", SPEC)


def test_merge_changes_against_the_pristine_image() -> None:
    inherited = [
        ("/a", 1),
        ("/a/x", 1),
        ("/etc", 0),
        ("/etc/issue", 2),
        ("/srv", 0),
        ("/usr/d", 2),
        ("/usr/d/n", 1),
    ]
    current = [
        {"Path": "/a", "Kind": 2},  # added by the snapshot, deleted since: never was
        {"Path": "/etc/issue", "Kind": 1},  # deleted by the snapshot, made again: replaced
        {"Path": "/srv/new", "Kind": 1},
        {"Path": "/usr/d", "Kind": 2},  # replaced again: the snapshot's children are gone
        {"Path": "/usr/d/m", "Kind": 1},
    ]
    assert merge_changes(inherited, current) == [
        ("/etc", 0), ("/etc/issue", 2), ("/srv", 0), ("/srv/new", 1), ("/usr/d", 2), ("/usr/d/m", 1),
    ]  # fmt: skip
