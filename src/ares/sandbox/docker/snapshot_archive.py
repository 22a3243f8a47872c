"""The on-disk form of a filesystem snapshot (``ARCHIVE_FORMAT``): checking and reading it.

A snapshot exported to a directory holds ``manifest.json`` and ``diff.tar.gz``: one gzip'd tar of
the paths the sandbox changed against its image, named relative to ``/`` (``app/main.py``), with
modes, numeric owners (no user or group names) and mtimes as the container sees them. A deleted
path is an empty regular file ``.wh.<name>`` in its parent and a directory that replaced the
image's (deleted, then made again) holds ``.wh..wh..opq``: the OCI layer conventions. Parents come
before their children.

An archive to import may come from anywhere, so every member is checked before anything is
written (:class:`MemberCheck`): no absolute names, no ``..``, no member inside a symlink the
archive made, symlinks whose relative target stays inside ``/`` (absolute targets are the
container's own paths and are kept: ``python -m venv`` makes them), hard links only to a file,
symlink or FIFO earlier in the archive, no devices or other special files, no duplicates, no
opaque marker for ``/`` itself.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ares.errors import SandboxError
from ares.sandbox.archive_format import DIFF, MANIFEST, MANIFEST_LIMIT, OPAQUE, WHITEOUT_PREFIX, Counts
from ares.sandbox.snapshots import ARCHIVE_FORMAT

# The manifest's fields shared with the local backend: ``format``, ``backend``, ``image`` (the image
# identity, a string), ``snapshot`` (its id), ``created``, ``ids`` ("sandbox": owners as the sandbox
# sees them), ``diff`` (``name``, ``sha256``, ``bytes``), ``counts``, ``changed_paths``, ``skipped``
# (the file and whiteout names and ``Counts`` are the two backends' own: ``ares.sandbox.archive_format``).


class ArchiveError(SandboxError):
    """A snapshot archive that is malformed, unsafe, or for another backend or image."""


# ------------------------------------------------------------------------------------- names
def relative_name(path: str) -> str:
    """``/app/x`` → ``app/x`` (the archive's member name of an absolute container path)."""
    return posixpath.normpath(path).lstrip("/")


def whiteout_name(path: str) -> str:
    """The member that deletes the absolute container path ``path``."""
    parent, name = posixpath.split(relative_name(path))
    return posixpath.join(parent, WHITEOUT_PREFIX + name)


def opaque_name(path: str) -> str:
    """The member that makes the directory ``path`` opaque (the image's children are gone)."""
    return posixpath.join(relative_name(path), OPAQUE)


def member_path(name: str) -> str:
    """A member name as a normalized relative path, or ArchiveError if it is unsafe."""
    if "\x00" in name:
        raise ArchiveError("a member name holds a NUL byte")
    if name.startswith("/"):
        raise ArchiveError(f"member {name!r} has an absolute name")
    stripped = name[2:] if name.startswith("./") else name
    stripped = stripped.rstrip("/")
    parts = stripped.split("/")
    if not stripped or any(part in ("", ".", "..") for part in parts):
        raise ArchiveError(f"member {name!r} is not a plain relative path (empty, '.' or '..' parts)")
    return stripped


# ---------------------------------------------------------------------------------- checking
@dataclass
class MemberCheck:
    """Checks an archive's members in order (see the module doc). ``check`` returns what a member
    is — ``"entry"``, ``"whiteout"`` or ``"opaque"`` — and the absolute container path it applies
    to (for a whiteout: the deleted path; for an opaque marker: the directory)."""

    seen: set[str] = field(default_factory=set)
    dirs: set[str] = field(default_factory=set)
    links: set[str] = field(default_factory=set)
    files: set[str] = field(default_factory=set)  # what a hard link may point to: no directory
    counts: Counts = field(default_factory=Counts)

    def check(self, member: tarfile.TarInfo) -> tuple[str, str]:
        path = member_path(member.name)
        parent, name = posixpath.split(path)
        self._not_through_a_link(member.name, parent)
        if path in self.seen:
            raise ArchiveError(f"member {member.name!r} appears twice")
        self.seen.add(path)
        if name.startswith(WHITEOUT_PREFIX):
            if not member.isreg() or member.size != 0:
                raise ArchiveError(f"whiteout {member.name!r} is not an empty regular file")
            if name == OPAQUE:
                if not parent:
                    raise ArchiveError("an opaque marker for / itself would delete the whole image")
                if parent not in self.dirs:
                    raise ArchiveError(
                        f"opaque marker {member.name!r} is not inside a directory of the archive"
                    )
                self.counts.add(member, "opaque")
                return "opaque", "/" + parent
            target = name[len(WHITEOUT_PREFIX) :]
            if target in ("", ".", "..") or target.startswith(WHITEOUT_PREFIX):
                raise ArchiveError(f"whiteout {member.name!r} names no deletable path")
            self.counts.add(member, "whiteout")
            return "whiteout", "/" + posixpath.join(parent, target)
        if member.isdir():
            self.dirs.add(path)
        elif member.issym():
            self._check_symlink(member, path)
            self.links.add(path)
            self.files.add(path)  # a hard link to a symlink is the symlink again
        elif member.islnk():
            target = member_path(member.linkname) if member.linkname else ""
            if target not in self.files:
                raise ArchiveError(
                    f"hard link {member.name!r} points to {member.linkname!r}, which is not a file earlier "
                    "in the archive"
                )
        elif member.isreg() or member.isfifo():
            self.files.add(path)
        else:
            raise ArchiveError(f"member {member.name!r} is a device or another special file")
        self.counts.add(member, "entry")
        return "entry", "/" + path

    def _not_through_a_link(self, name: str, parent: str) -> None:
        while parent:
            if parent in self.links:
                raise ArchiveError(f"member {name!r} lies inside {parent!r}, a symlink of the archive")
            parent = posixpath.dirname(parent)

    @staticmethod
    def _check_symlink(member: tarfile.TarInfo, path: str) -> None:
        target = member.linkname
        if not target or "\x00" in target:
            raise ArchiveError(f"symlink {member.name!r} has an empty or NUL target")
        if target.startswith("/"):
            return  # the container's own path, resolved inside its root
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
        if resolved == ".." or resolved.startswith("../"):
            raise ArchiveError(f"symlink {member.name!r} points outside the filesystem ({target!r})")


def clean_member(member: tarfile.TarInfo) -> tarfile.TarInfo:
    """The member with a normalized name, numeric owners only and permission bits only."""
    member.name = member_path(member.name)
    if member.islnk():
        member.linkname = member_path(member.linkname)
    member.uname = member.gname = ""
    member.mode &= 0o7777
    member.pax_headers = {}
    return member


# ---------------------------------------------------------------------------------- manifest
def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def write_manifest(dest: Path, manifest: dict[str, Any]) -> None:
    """Write ``manifest.json`` atomically (it is written last: its presence marks a whole export)."""
    staging = dest / f".{MANIFEST}.tmp"
    staging.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    os.replace(staging, dest / MANIFEST)


def read_manifest(src: Path, backend: str) -> dict[str, Any]:
    """The manifest of the export at ``src``, checked: format, backend, the archive's checksum."""
    file = src / MANIFEST
    try:
        if file.stat().st_size > MANIFEST_LIMIT:
            raise ArchiveError(f"{file} is too large to be a snapshot manifest")
        manifest = json.loads(file.read_text())
    except FileNotFoundError:
        raise ArchiveError(f"{src} is not an exported snapshot: {MANIFEST} is missing") from None
    except (OSError, ValueError) as exc:
        raise ArchiveError(f"cannot read {file}: {exc}") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != ARCHIVE_FORMAT:
        found = manifest.get("format") if isinstance(manifest, dict) else type(manifest).__name__
        raise ArchiveError(f"{file} has format {found!r}; this ARES reads {ARCHIVE_FORMAT!r}")
    if manifest.get("backend") != backend:
        raise ArchiveError(
            f"{src} is a snapshot of the {manifest.get('backend')!r} backend, which applies to another "
            f"kind of image (its image is {json.dumps(manifest.get('image'))}); the {backend} backend "
            "imports only its own snapshots"
        )
    if not isinstance(manifest.get("image"), str) or not isinstance(manifest.get("diff"), dict):
        raise ArchiveError(f"{file} lacks the image or the diff description")
    archive = src / DIFF
    if not archive.is_file():
        raise ArchiveError(f"{src} is missing {DIFF}")
    expected = manifest["diff"].get("sha256")
    if expected and sha256_file(archive) != expected:
        raise ArchiveError(f"{archive} does not match the checksum in its manifest (corrupt or altered)")
    return manifest
