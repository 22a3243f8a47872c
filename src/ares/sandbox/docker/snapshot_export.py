"""Export of a docker snapshot: the changed paths, read from a throwaway container of the snapshot's
image with the archive API, written as one ``diff.tar.gz`` with a manifest (see ``snapshot.py``):
files streamed from the archive API, owners, modes and link targets from the listing
(``snapshot_listing.py``), deletions and opaque dirs as OCI whiteouts.
"""

from __future__ import annotations

import contextlib
import io
import posixpath
import secrets
import tarfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import docker.errors
import docker.utils

from ares.errors import SandboxError
from ares.sandbox.base import SandboxSpec
from ares.sandbox.docker import janitor
from ares.sandbox.docker.client import api_message, run_blocking
from ares.sandbox.docker.containers import create_container
from ares.sandbox.docker.engine import DockerEngine
from ares.sandbox.docker.outputs import (
    ADDED,
    DELETED,
    EXEC_SCRATCH,
    MODIFIED,
)
from ares.sandbox.docker.snapshot import (
    BACKEND,
    Change,
    changes_of,
    check_backend,
    log,
    now_iso,
    path_components,
    release_blocking,
)
from ares.sandbox.docker.snapshot_archive import (
    DIFF,
    MANIFEST,
    Counts,
    clean_member,
    member_path,
    opaque_name,
    relative_name,
    sha256_file,
    whiteout_name,
    write_manifest,
)
from ares.sandbox.docker.snapshot_listing import (
    ExportItem,
    Listed,
    export_plan,
    start_and_list,
    stat_blocking,
)
from ares.sandbox.snapshots import ARCHIVE_FORMAT, FilesystemSnapshot


def export_blocking(
    client: docker.DockerClient, engine: DockerEngine, snapshot: FilesystemSnapshot, dest: Path
) -> dict[str, Any]:
    """Write ``dest/diff.tar.gz``, then ``dest/manifest.json``, for ``snapshot``. Blocking."""
    check_backend(snapshot)
    changes = _exportable_changes(snapshot)
    base = _inspect_images(client.api, snapshot)
    dest.mkdir(parents=True, exist_ok=True)
    if any((dest / name).exists() for name in (MANIFEST, DIFF)):
        raise SandboxError(f"{dest} already holds a snapshot archive")
    written = _write_diff(client, engine, snapshot, export_plan(changes), dest)
    manifest = {
        "format": ARCHIVE_FORMAT,
        "backend": BACKEND,
        "image": str(base["Id"]),
        "snapshot": snapshot.id,
        "created": now_iso(),
        # "archive": without a find listing, owners are what the engine's archives say (root on Podman).
        "ids": "sandbox" if written.listed else "archive",
        "diff": {"name": DIFF, "sha256": sha256_file(dest / DIFF), "bytes": (dest / DIFF).stat().st_size},
        "counts": written.counts.to_dict(),
        "changed_paths": snapshot.changed_paths,
        "skipped": {"count": written.counts.skipped_count, "paths": written.counts.skipped},
        # Docker only: what else identifies the image, and how the files were read.
        "image_layers": list((base.get("RootFS") or {}).get("Layers") or ()),
        "image_names": list(base.get("RepoTags") or ()),
        "reader": written.reader,
    }
    write_manifest(dest, manifest)
    return manifest


def _exportable_changes(snapshot: FilesystemSnapshot) -> list[Change]:
    """The snapshot's changed paths; SandboxError if the engine could not list them when it was taken."""
    changes = changes_of(snapshot)
    if changes is None:
        why = snapshot.metadata.get("changes_error") or "unknown reason"
        raise SandboxError(
            f"snapshot {snapshot.id} cannot be exported: the engine could not list its changes ({why}). "
            "It can still be restored in this process (from_snapshot)."
        )
    return changes


def _inspect_images(api: docker.APIClient, snapshot: FilesystemSnapshot) -> dict[str, Any]:
    """The base image's inspection; SandboxError if it or the snapshot's own image is gone."""
    try:
        base = api.inspect_image(snapshot.image)
        api.inspect_image(snapshot.ref)
    except docker.errors.ImageNotFound as exc:
        raise SandboxError(
            f"snapshot {snapshot.id} cannot be exported: its image is gone ({api_message(exc)}); it was "
            "discarded, or removed when the process that took it exited"
        ) from None
    return base


@dataclass(frozen=True)
class _Written:
    """What writing ``diff.tar.gz`` found out that the manifest records."""

    counts: Counts
    reader: str  # "tar" or "archive-api": how the files were read
    listed: bool  # owners come from a find listing in the container (else from the engine's archives)


def _write_diff(
    client: docker.DockerClient,
    engine: DockerEngine,
    snapshot: FilesystemSnapshot,
    items: Sequence[ExportItem],
    dest: Path,
) -> _Written:
    """Write ``dest/diff.tar.gz`` from a throwaway container of the snapshot, removed afterwards
    (with the snapshot's image if it was discarded meanwhile); nothing is left on failure."""
    api = client.api
    # Workdir "/": the engine creates a missing workdir, which would hide the snapshot's deletion of it.
    container = create_container(client, engine, SandboxSpec(workdir="/"), snapshot.ref)
    staging = dest / f".{DIFF}.tmp"
    try:
        listing = start_and_list(api, container, items)
        counts = Counts()
        with tarfile.open(staging, "w:gz", compresslevel=6, format=tarfile.PAX_FORMAT) as out:
            writer = DiffWriter(api, container, out, counts, listing)
            reader = writer.write_all(items)
    except BaseException:
        staging.unlink(missing_ok=True)
        raise
    finally:
        with contextlib.suppress(docker.errors.DockerException):
            api.remove_container(container, force=True, v=True)
        janitor.untrack_container(container)
        with contextlib.suppress(SandboxError):
            release_blocking(api, snapshot.ref)
    staging.replace(dest / DIFF)
    return _Written(counts, reader, listing is not None)


class DiffWriter:
    """Writes the export's members, in order, into the open output tar."""

    def __init__(
        self,
        api: docker.APIClient,
        container: str,
        out: tarfile.TarFile,
        counts: Counts,
        listing: dict[str, Listed] | None,
    ) -> None:
        self.api, self.container, self.out, self.counts, self.listing = api, container, out, counts, listing

    def write_all(self, items: Sequence[ExportItem]) -> str:
        """Write every item: with one run of the container's own tar when it has GNU tar and a
        listing was made, else path by path through the archive API. Returns which was used."""
        if self.listing is not None and self._with_tar(items, self.listing):
            return "tar"
        for item in items:
            self.write(item)
        return "archive-api"

    def _with_tar(self, items: Sequence[ExportItem], listing: Mapping[str, Listed]) -> bool:
        """Archive every listed path in order with ``tar --no-recursion`` in the container (the
        archive API costs about 0.1 s per call on Podman: seconds for a few dozen files). False,
        with nothing written, if that tar cannot run."""
        plan = _tar_plan(items, listing)
        for path in plan.paths:
            if path not in plan.wanted:
                self.counts.skip(path, "socket or device")
        if plan.wanted:
            run = self._start_tar([p for p in plan.paths if p in plan.wanted])
            if run is None:
                return False
            self._add_tar_output(run, plan)
        for path in plan.whiteouts:
            self._add(_whiteout(path), "whiteout")
        return True

    def _start_tar(self, paths: Sequence[str]) -> _TarRun | None:
        """Start the container's tar on ``paths`` (passed as a NUL-separated file, so any name
        works); None, with a log line, if it gives no archive (no GNU tar in the image)."""
        names = f"/.ares-export-{secrets.token_hex(6)}"
        self.api.put_archive(self.container, "/", _single_file(names[1:], _nul_list(paths)))
        argv = [
            "tar", "--create", "--file=-", "--format=posix", "--numeric-owner", "--no-recursion", "--null",
            "--no-unquote", f"--files-from={names}",
        ]  # fmt: skip
        created = self.api.exec_create(self.container, argv, stdout=True, stderr=True, workdir="/")
        stderr: list[bytes] = []
        chunks = self.api.exec_start(created["Id"], stream=True, demux=True)
        try:  # opened here, not in a with: a tar that cannot run gives no first header
            archive = tarfile.open(fileobj=_ChunkReader(_stdout(chunks, stderr)), mode="r|")  # noqa: SIM115
        except (tarfile.TarError, EOFError) as exc:
            log.info("cannot archive the snapshot with its own tar (%s): %s", exc, b"".join(stderr)[-300:])
            return None
        return _TarRun(archive, created["Id"], stderr)

    def _add_tar_output(self, run: _TarRun, plan: _TarPlan) -> None:
        """Copy the container tar's members into the output; SandboxError if it archived a path not
        asked for, or missed one."""
        seen: set[str] = set()
        with run.archive as archive:
            for member in archive:
                absolute = "/" + member_path(member.name)
                if absolute not in plan.wanted or absolute in seen:
                    raise SandboxError(
                        f"the snapshot's tar archived {member.name!r}, which was not asked for"
                    )
                seen.add(absolute)
                if not _kept(member):
                    self.counts.skip(absolute, "socket or device")
                    continue
                clean_member(member)
                self._add(member, "entry", archive.extractfile(member) if member.isreg() else None)
                if absolute in plan.opaque:
                    self._add(_whiteout_file(opaque_name(absolute)), "opaque")
        code = self.api.exec_inspect(run.exec_id).get("ExitCode")
        if seen != plan.wanted:
            missing = ", ".join(sorted(plan.wanted - seen)[:5])
            raise SandboxError(
                f"the snapshot's tar exited {code} without archiving {missing}: "
                f"{b''.join(run.stderr).decode(errors='replace')[-500:]}"
            )

    def info(self, path: str) -> Listed | None:
        if self.listing is not None:
            return self.listing.get(path)
        return stat_blocking(self.api, self.container, path)

    def write(self, item: ExportItem) -> None:
        got = self.info(item.path)
        if got is None:
            if item.kind != ADDED:  # an added path that is gone again was never in the image
                self._add(_whiteout(item.path), "whiteout")
        elif got.type == "d" and item.kind == MODIFIED:
            if got.uid is not None:  # without a listing the owner is unknown: leave the image's
                self._add(_entry(item.path, tarfile.DIRTYPE, got), "entry")
        elif got.type == "l":
            member = _entry(item.path, tarfile.SYMTYPE, got)
            member.linkname = got.link
            self._add(member, "entry")
        elif got.type in ("f", "d", "p"):
            self._copy(item.path, opaque=got.type == "d" and item.kind == DELETED)
        else:
            self.counts.skip(item.path, "socket or device")

    def _add(self, member: tarfile.TarInfo, kind: str, data: Any = None) -> None:
        self.out.addfile(member, data)
        self.counts.add(member, kind)

    def _copy(self, path: str, *, opaque: bool) -> None:
        """Stream ``path`` from the container into the output, renamed under its parent."""
        parent = posixpath.dirname(relative_name(path))
        stream, _stat = self.api.get_archive(self.container, path, chunk_size=1 << 20)
        try:
            with tarfile.open(fileobj=_ChunkReader(stream), mode="r|") as archive:
                first = True
                for member in archive:
                    name = posixpath.join(parent, member_path(member.name))
                    if first and name != relative_name(path):
                        raise SandboxError(f"the engine archived {path} as {member.name!r}")
                    first = False
                    absolute = "/" + name
                    if absolute.startswith(EXEC_SCRATCH):
                        continue
                    if not _kept(member):
                        self.counts.skip(absolute, "socket or device")
                        continue
                    if member.islnk():
                        member.linkname = posixpath.join(parent, member_path(member.linkname))
                    member.name = name
                    owner = self.listing.get(absolute) if self.listing is not None else None
                    if owner is not None and owner.uid is not None:
                        member.uid, member.gid = owner.uid, owner.gid or 0
                    clean_member(member)
                    self._add(member, "entry", archive.extractfile(member) if member.isreg() else None)
                    if opaque and absolute == path:
                        self._add(_whiteout_file(opaque_name(path)), "opaque")
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()


@dataclass(frozen=True)
class _TarPlan:
    """What one run of the container's tar archives, and the whiteouts written after it."""

    paths: tuple[str, ...]  # every listed path, in archive order: each item, then what is below its tree
    wanted: frozenset[str]  # those tar archives (files, dirs, links, FIFOs); the rest are skipped
    whiteouts: tuple[str, ...]  # items gone from the container that the image had
    opaque: frozenset[str]  # deleted directories made again: marked opaque after their entry


def _tar_plan(items: Sequence[ExportItem], listing: Mapping[str, Listed]) -> _TarPlan:
    """The tar run for ``items``: an added or deleted directory (a tree) brings every path below it."""
    trees = {i.path for i in items if i.kind in (ADDED, DELETED) and _is_dir(listing.get(i.path))}
    below = _below_trees(trees, listing)
    paths: list[str] = []
    whiteouts: list[str] = []
    for item in items:
        if item.path not in listing:
            if item.kind != ADDED:  # an added path that is gone again was never in the image
                whiteouts.append(item.path)
            continue
        paths.append(item.path)
        paths.extend(below.get(item.path, ()))
    opaque = frozenset(i.path for i in items if i.kind == DELETED and i.path in trees)
    wanted = frozenset(p for p in paths if listing[p].type in ("f", "d", "l", "p"))
    return _TarPlan(tuple(paths), wanted, tuple(whiteouts), opaque)


def _below_trees(trees: set[str], listing: Mapping[str, Listed]) -> dict[str, list[str]]:
    """Each tree's listed paths below it, parents first (the export's own scratch dir left out)."""
    below: dict[str, list[str]] = {tree: [] for tree in trees}
    for path in sorted(listing, key=path_components):
        parent = posixpath.dirname(path)
        while parent != "/" and parent not in trees:
            parent = posixpath.dirname(parent)
        if parent in trees and not path.startswith(EXEC_SCRATCH):
            below[parent].append(path)
    return below


@dataclass(frozen=True)
class _TarRun:
    """The container's tar, running: its output as a stream archive, its exec id, its stderr so far."""

    archive: tarfile.TarFile
    exec_id: str
    stderr: list[bytes]


def _kept(member: tarfile.TarInfo) -> bool:
    return member.isreg() or member.isdir() or member.issym() or member.islnk() or member.isfifo()


def _is_dir(got: Listed | None) -> bool:
    return got is not None and got.type == "d"


def _stdout(chunks: Iterable[tuple[bytes | None, bytes | None]], stderr: list[bytes]) -> Iterator[bytes]:
    """An exec's demuxed stream: yield stdout, keep stderr."""
    for out, err in chunks:
        if err:
            stderr.append(err)
        if out:
            yield out


def _nul_list(paths: Iterable[str]) -> bytes:
    return b"".join(p.encode(errors="surrogateescape") + b"\0" for p in paths)


def _single_file(name: str, data: bytes) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size, info.mode = len(data), 0o600
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _entry(path: str, kind: bytes, got: Listed) -> tarfile.TarInfo:
    member = tarfile.TarInfo(relative_name(path))
    member.type = kind
    member.mode = got.mode & 0o7777
    member.uid, member.gid = got.uid or 0, got.gid or 0
    member.mtime = int(got.mtime)
    return member


def _whiteout(path: str) -> tarfile.TarInfo:
    return _whiteout_file(whiteout_name(path))


def _whiteout_file(name: str) -> tarfile.TarInfo:
    member = tarfile.TarInfo(name)
    member.mode = 0o644
    return member


class _ChunkReader(io.RawIOBase):
    """A file over the SDK's iterator of byte chunks (for tarfile's stream mode)."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self.argv_chunks = iter(chunks)
        self._buffer = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._buffer:
            try:
                self._buffer = next(self.argv_chunks)
            except StopIteration:
                return 0
        size = min(len(buffer), len(self._buffer))
        buffer[:size] = self._buffer[:size]
        self._buffer = self._buffer[size:]
        return size


# --------------------------------------------------------------------------------- async API
async def export_snapshot(engine: DockerEngine, snapshot: FilesystemSnapshot, path: Path) -> None:
    client = await engine.client()
    await run_blocking(export_blocking, client, engine, snapshot, Path(path))
