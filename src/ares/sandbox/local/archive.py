"""Local snapshots moved between processes: export to an archive dir, import as a new layer.

Export writes a snapshot's merged diff as ``manifest.json`` + ``diff.tar.gz`` (OCI whiteouts, sandbox
ids); import unpacks such an archive into a new layer of this process (registered in ``snapshot.py``)
with real overlay whiteouts and opaque marks, refusing anything that is not a plain file tree (see
``import_archive``).
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import json
import os
import posixpath
import secrets
import stat
import tarfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ares.errors import SandboxError
from ares.images.layer_writer import LayerWriter, UnsafeEntry
from ares.images.rootfs import OverlayMount, RootfsPlan
from ares.sandbox.archive_format import DIFF, MANIFEST, MANIFEST_LIMIT, OPAQUE, WHITEOUT_PREFIX, Counts
from ares.sandbox.local import janitor, layers, limits
from ares.sandbox.local.snapshot import BACKEND, layers_of, mounts_of, plan_digest, register, snapshots_dir
from ares.sandbox.local.stack import resolve_image
from ares.sandbox.snapshots import ARCHIVE_FORMAT, FilesystemSnapshot

if TYPE_CHECKING:
    from ares.sandbox.base import SandboxSpec

#: Sandbox ids an archive may hold (a root-run sandbox maps 65,536 ids).
ID_LIMIT = 65_536
#: Unprivileged, host ids other than the invoking user's show as this inside (the overflow id).
OVERFLOW_ID = 65_534
MAX_MEMBERS = 2_000_000
GZIP_LEVEL = 6


# ---------------------------------------------------------------------- export
def _view_ids(st: os.stat_result) -> tuple[int, int]:
    """The owner the sandbox sees for a layer entry: on-disk ids are the sandbox's own when root-run
    (idmapped layers keep them canonical); unprivileged, the invoking user is root and every other
    host id shows as the overflow id."""
    if os.geteuid() == 0:
        return st.st_uid, st.st_gid
    uid = 0 if st.st_uid == os.geteuid() else OVERFLOW_ID
    gid = 0 if st.st_gid == os.getegid() else OVERFLOW_ID
    return uid, gid


def _shown(path: str) -> str:
    """A layer path as the manifest's ``skipped`` names it: absolute, undecodable bytes escaped."""
    return "/" + os.fsencode(path).decode("utf-8", "backslashreplace")


def export_archive(snapshot: FilesystemSnapshot, dest: Path) -> dict[str, Any]:
    """Write ``dest/diff.tar.gz`` and ``dest/manifest.json`` (last: an archive without a manifest is
    incomplete) for a snapshot of this process. Returns the manifest."""
    chain = layers_of(snapshot)
    dest.mkdir(parents=True, exist_ok=True)
    if any(name in (MANIFEST, DIFF) for name in os.listdir(dest)):
        raise SandboxError(f"{dest} already holds a snapshot archive")
    mounts = mounts_of(chain)
    counts = Counts()
    part = dest / f".{DIFF}.part"
    digest = hashlib.sha256()
    with open(part, "wb") as raw:
        hashing = _HashingWriter(raw, digest)
        with tarfile.open(
            fileobj=hashing, mode="w:gz", format=tarfile.PAX_FORMAT, compresslevel=GZIP_LEVEL
        ) as tar:
            _write_tar(tar, chain, mounts, counts)
    os.replace(part, dest / DIFF)
    manifest = {
        "format": ARCHIVE_FORMAT,
        "backend": BACKEND,
        "image": snapshot.image,
        "snapshot": snapshot.id,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "ids": "sandbox",
        "diff": {"name": DIFF, "sha256": digest.hexdigest(), "bytes": (dest / DIFF).stat().st_size},
        "counts": counts.to_dict(),
        "changed_paths": snapshot.changed_paths,
        "skipped": {"count": counts.skipped_count, "paths": counts.skipped},
    }
    tmp = dest / f".{MANIFEST}.part"
    tmp.write_text(json.dumps(manifest, indent=1))
    os.replace(tmp, dest / MANIFEST)
    return manifest


class _HashingWriter:
    def __init__(self, raw: Any, digest: Any) -> None:
        self._raw, self._digest = raw, digest

    def write(self, data: bytes) -> int:
        self._digest.update(data)
        return int(self._raw.write(data))

    def flush(self) -> None:
        self._raw.flush()


def _write_tar(
    tar: tarfile.TarFile, chain: Sequence[Path], mounts: Sequence[OverlayMount], counts: Counts
) -> None:
    links: dict[tuple[int, int], str] = {}
    skip_below: str | None = None
    for entry in layers.merged(chain, mounts):
        if skip_below is not None and entry.path.startswith(skip_below):
            continue
        skip_below = None
        name = posixpath.basename(entry.path)
        if name.startswith(WHITEOUT_PREFIX):  # OCI reserves these names; one would read as a deletion
            counts.skip(_shown(entry.path), "name reserved for whiteouts")
            if entry.kind == "dir":
                skip_below = entry.path + "/"
            continue
        if entry.kind == "whiteout":
            info = tarfile.TarInfo(posixpath.join(posixpath.dirname(entry.path), WHITEOUT_PREFIX + name))
            info.mode = 0o644
            tar.addfile(info)
            counts.whiteouts += 1
        else:
            _add_member(tar, entry, links, counts)


def _add_member(
    tar: tarfile.TarFile, entry: layers.Entry, links: dict[tuple[int, int], str], counts: Counts
) -> None:
    """One dir, file, symlink or fifo of the merged diff (with the sandbox's ids); ``links`` maps
    files with several links, seen so far, to their first path."""
    st = entry.st
    info = tarfile.TarInfo(entry.path)
    info.mode = stat.S_IMODE(st.st_mode)
    info.uid, info.gid = _view_ids(st)
    info.uname = info.gname = ""
    info.mtime = int(st.st_mtime)
    if entry.kind == "dir":
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
        counts.dirs += 1
        if entry.opaque:
            marker = tarfile.TarInfo(posixpath.join(entry.path, OPAQUE))
            marker.mode = 0o644
            tar.addfile(marker)
            counts.opaque_dirs += 1
    elif entry.kind == "file":
        _add_file(tar, entry, info, links, counts)
    elif entry.kind == "symlink":
        info.type = tarfile.SYMTYPE
        info.linkname = os.readlink(entry.source)
        if climbs_out(entry.path, info.linkname):
            counts.skip(_shown(entry.path), "relative symlink climbing above /")
            return
        tar.addfile(info)
        counts.symlinks += 1
    elif entry.kind == "fifo":
        info.type = tarfile.FIFOTYPE
        tar.addfile(info)
        counts.fifos += 1
    else:
        counts.skip(_shown(entry.path), "socket or device")


def _add_file(
    tar: tarfile.TarFile,
    entry: layers.Entry,
    info: tarfile.TarInfo,
    links: dict[tuple[int, int], str],
    counts: Counts,
) -> None:
    """A regular file's content, or a hard link to the first path of a file archived already."""
    st = entry.st
    key = (st.st_dev, st.st_ino)
    if st.st_nlink > 1 and key in links:
        info.type = tarfile.LNKTYPE
        info.linkname = links[key]
        tar.addfile(info)
        counts.hardlinks += 1
        return
    fd = os.open(entry.source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        info.size = os.fstat(f.fileno()).st_size
        tar.addfile(info, f)
    if st.st_nlink > 1:
        links[key] = entry.path
    counts.files += 1
    counts.content_bytes += info.size


# ---------------------------------------------------------------------- import
def read_manifest(source: Path) -> dict[str, Any]:
    """The manifest of an exported archive dir, checked for format and backend."""
    path = source / MANIFEST
    try:
        with open(path, "rb") as f:
            data = f.read(MANIFEST_LIMIT + 1)
    except FileNotFoundError as exc:
        raise SandboxError(f"{source} is not a snapshot archive: {MANIFEST} is missing") from exc
    except OSError as exc:
        raise SandboxError(f"cannot read {path}: {exc.strerror}") from exc
    if len(data) > MANIFEST_LIMIT:
        raise SandboxError(f"{path} is too large to be a snapshot manifest")
    try:
        manifest = json.loads(data)
    except ValueError as exc:
        raise SandboxError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(manifest, dict):
        raise SandboxError(f"{path} is not a snapshot manifest")
    if manifest.get("format") != ARCHIVE_FORMAT:
        raise SandboxError(
            f"{source} is a snapshot archive of format {manifest.get('format')!r}; this ARES reads "
            f"{ARCHIVE_FORMAT!r}"
        )
    if manifest.get("backend") != BACKEND:
        raise SandboxError(
            f"{source} holds a snapshot of the {manifest.get('backend')!r} backend; the local sandbox "
            "imports only local snapshots"
        )
    if not isinstance(manifest.get("image"), str) or not isinstance(manifest.get("diff"), dict):
        raise SandboxError(f"{path} lacks the image or the diff description")
    return manifest


def import_archive(source: Path, plan: RootfsPlan, byte_limit: int | None) -> FilesystemSnapshot:
    """Unpack the archive dir ``source`` (written by ``export_archive``) into a new layer of this
    process and return its snapshot. The archive is checked against its manifest's sha256 first.

    Refused (nothing is left behind): another format, backend or image; members with absolute paths,
    ``..`` or empty components, written twice or below a non-directory (e.g. through a symlink the
    archive made); hard links to anything but an earlier file of the archive; devices, sockets and
    other special files (whiteouts come as ``.wh.`` names); ids outside the sandbox's 65,536; more
    content than ``byte_limit`` (the sandbox's disk limit) or members than ``MAX_MEMBERS``.
    """
    manifest = read_manifest(source)
    if manifest["image"] != plan_digest(plan):
        raise SandboxError(
            f"the snapshot archive {source} was taken on another image ({manifest['image']}); the "
            f"sandbox spec's image is {plan_digest(plan)}"
        )
    diff = source / DIFF
    expected = str(manifest["diff"].get("sha256", ""))
    digest = hashlib.sha256()
    try:
        with open(diff, "rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
    except OSError as exc:
        raise SandboxError(f"cannot read the snapshot diff {diff}: {exc.strerror}") from exc
    if digest.hexdigest() != expected:
        raise SandboxError(f"the snapshot diff {diff} is corrupt (its sha256 does not match the manifest)")
    snapshot_id = secrets.token_hex(8)
    dest = snapshots_dir() / snapshot_id
    try:
        counts = _unpack(diff, dest, plan.mounts, byte_limit)
    except BaseException as exc:
        janitor.remove_tree(dest)
        if isinstance(exc, (UnsafeEntry, tarfile.TarError, EOFError, OSError)):
            why = f"{exc.strerror}: {exc.filename}" if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise SandboxError(f"refusing the snapshot archive {source}: {why}") from exc
        raise
    register(dest, plan.mounts, holder=snapshot_id)
    return FilesystemSnapshot(
        id=snapshot_id,
        backend=BACKEND,
        image=manifest["image"],
        ref=str(dest),
        size_bytes=counts[1],
        changed_paths=int(manifest.get("changed_paths") or counts[0]),
        metadata={
            "layers": [str(dest)],
            "imported_from": str(manifest.get("snapshot", "")),
            "archive": str(source),
        },
    )


def _unpack(
    diff: Path, dest: Path, mounts: Sequence[OverlayMount], byte_limit: int | None
) -> tuple[int, int]:
    writer = LayerWriter(dest)
    owner = os.geteuid() == 0
    members = total = 0
    with tarfile.open(diff, mode="r|gz") as tar:
        for member in tar:
            members += 1
            if members > MAX_MEMBERS:
                raise UnsafeEntry(f"more than {MAX_MEMBERS} members")
            name = _member_path(member.name)
            base = posixpath.basename(name)
            parent = posixpath.dirname(name)
            if base.startswith(WHITEOUT_PREFIX):
                if not (member.isreg() and member.size == 0):
                    raise UnsafeEntry(f"{member.name!r}: a whiteout must be an empty file")
                if base == OPAQUE:
                    if not parent:
                        raise UnsafeEntry("an opaque marker for the root")
                    writer.opaque(_layer_path(parent, mounts, whole_mount_ok=False))
                else:
                    target = base[len(WHITEOUT_PREFIX) :]
                    if target in ("", ".", "..") or target.startswith(WHITEOUT_PREFIX):
                        raise UnsafeEntry(f"{member.name!r} is not a valid whiteout")
                    writer.whiteout(_layer_path(posixpath.join(parent, target), mounts, whole_mount_ok=False))
                continue
            for value in (member.uid, member.gid):
                if not 0 <= value < ID_LIMIT:
                    raise UnsafeEntry(f"{member.name!r} is owned by id {value}, outside the sandbox's ids")
            uid, gid = (member.uid, member.gid) if owner else (os.geteuid(), os.getegid())
            if member.isdir():
                rel = _layer_path(name, mounts, whole_mount_ok=True)
                if rel is not None:
                    writer.directory(rel, member.mode, uid, gid, member.mtime)
                continue
            rel = _layer_path(name, mounts, whole_mount_ok=False)
            if member.isreg():
                total += member.size
                if byte_limit is not None and total > byte_limit:
                    raise UnsafeEntry(f"its content exceeds the sandbox's disk limit ({byte_limit} bytes)")
                stream = tar.extractfile(member)
                assert stream is not None
                writer.file(rel, member.mode, uid, gid, member.mtime, stream, member.size)
            elif member.islnk():
                writer.hardlink(rel, _layer_path(_member_path(member.linkname), mounts, whole_mount_ok=False))
            elif member.issym():
                if climbs_out(name, member.linkname):
                    raise UnsafeEntry(f"symlink {member.name!r} -> {member.linkname!r} climbs above /")
                writer.symlink(rel, member.linkname, uid, gid, member.mtime)
            elif member.isfifo():
                writer.fifo(rel, member.mode, uid, gid, member.mtime)
            else:
                raise UnsafeEntry(f"{member.name!r} is a device or special file")
    writer.finish()
    return members, total


def climbs_out(path: str, target: str) -> bool:
    """Whether the relative symlink ``target`` of sandbox ``path`` leads above / (harmless inside
    the sandbox, where / is its own parent, but never something a real file tree needs)."""
    if target.startswith("/"):
        return False
    depth = path.count("/")  # dirs between / and the link
    for part in target.split("/"):
        if part == "..":
            depth -= 1
            if depth < 0:
                return True
        elif part not in ("", "."):
            depth += 1
    return False


def _member_path(name: str) -> str:
    """A member name as a relative sandbox path; refused if absolute, with ``..`` or empty parts."""
    if "\0" in name or len(name) > 4096:
        raise UnsafeEntry(f"{name[:200]!r} is not a valid name")
    if name.startswith("/"):
        raise UnsafeEntry(f"{name!r} is an absolute path")
    parts = name.split("/")
    while parts and parts[0] == ".":
        parts = parts[1:]
    if parts and parts[-1] == "":
        parts = parts[:-1]
    if not parts or any(p in ("", ".", "..") for p in parts):
        raise UnsafeEntry(f"{name!r} is not a plain relative path")
    return "/".join(parts)


def _layer_path(path: str, mounts: Sequence[OverlayMount], *, whole_mount_ok: bool) -> str:
    """Where sandbox ``path`` goes in a layer dir: ``<mount key>/<path in the mount>``."""
    mount, rel = layers.mount_of("/" + path, mounts)
    if rel == ".":
        if whole_mount_ok:
            return None  # type: ignore[return-value]  # a mount's own root keeps its attributes
        raise UnsafeEntry(f"/{path} is a mount point of the image")
    return f"{mount.key}/{rel}"


async def import_snapshot(path: Path, spec: SandboxSpec) -> FilesystemSnapshot:
    plan, _, _ = await resolve_image(spec.image)
    resources = limits.with_defaults(spec.resources, limits.DEFAULT_RESOURCES)
    byte_limit = None if resources.storage_mb is None else resources.storage_mb * (1 << 20)
    return await asyncio.to_thread(import_archive, Path(path), plan, byte_limit)


async def export_snapshot(snapshot: FilesystemSnapshot, path: Path) -> None:
    await asyncio.to_thread(export_archive, snapshot, Path(path))
