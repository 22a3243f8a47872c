"""The agent's changes to an output dir, worked out on the host from two archives and re-packed safely.

A docker verifier fork (``DockerSandbox.fork_verifier``) must receive only what the agent changed
below an output dir (e.g. /testbed), minus the paths a ``drop`` callback names. The engine's own
change list cannot be trusted for that: Podman's fails outright on some type changes an agent can
make (a file replaced by a directory). So the host compares two tars of the dir from the archive API:
the agent's (stopped) container's and the fresh fork's (the pristine image's). Neither is extracted
anywhere; only their listings and file hashes are compared. The result is a ``CarryPlan``: paths to
delete in the fork (with the image's own tools, before anything of the agent's is there) and a new
tar, written here from the agent's archive, that the engine extracts into the fork.

The new tar holds regular files (a hard link becomes a copy of its content), directories and
symlinks (as links: nothing is written below one, and no later entry goes through one), with
setuid/setgid bits cleared. FIFOs, devices and sockets of the agent are never carried: the plan
counts them and ``check_plan`` refuses it (``special_file``), as it refuses every changed entry that
breaks ``carry_bounds`` (counts, sizes, depth, path length, modes). Names are checked like image
layers' (no absolute paths, no ``..``); member counts are bounded. Every refusal is a
``CarryRefused``, an ``OutputRefusedError`` the verifier scores 0. Dropped paths are skipped in
both listings, so the image's version of each stays, including when the agent deleted or replaced a
directory holding one.
"""

from __future__ import annotations

import hashlib
import posixpath
import stat
import tarfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Literal

from ares.errors import OutputRefusedError
from ares.images.store.extract import LayerRefused, member_path
from ares.sandbox.carry_bounds import CarryBudget

Kind = Literal["dir", "file", "link", "special"]
#: Mode bits never carried: setuid and setgid.
STRIPPED_BITS = 0o6000
_CHUNK = 1 << 20


class CarryRefused(OutputRefusedError):
    """The agent's archive breaks a bound or a rule; ``str()`` says which (``reason``: one of
    ``carry_bounds.REASONS``, or ``bad_archive`` for names and duplicates no real tree has)."""

    def __init__(self, detail: str, reason: str = "bad_archive") -> None:
        super().__init__(reason, detail)


@dataclass(frozen=True, slots=True)
class CarryLimits:
    """Bounds of one output dir's transfer (the agent controls its size and shape)."""

    #: Bytes of the agent's archive of the dir (spooled on the host).
    max_archive_bytes: int = 8 << 30
    #: Members of either archive.
    max_members: int = 2_000_000
    #: Bytes of the files actually carried into the fork.
    max_carry_bytes: int = 2 << 30


@dataclass(frozen=True, slots=True)
class Entry:
    """One path of an archive: its kind, carried mode bits and what identifies its content."""

    kind: Kind
    mode: int
    content: str = ""  # a file's sha256, a link's target
    member: tarfile.TarInfo | None = field(default=None, compare=False, repr=False)
    size: int = field(default=0, compare=False)  # a file's bytes (a hard link's: its target's)

    def same(self, other: Entry) -> bool:
        return (self.kind, self.mode, self.content) == (other.kind, other.mode, other.content)


@dataclass(slots=True)
class Listing:
    """An archive of an output dir by absolute path (parents before children), without dropped
    paths; ``dropped`` are the top-most paths that were left out."""

    entries: dict[str, Entry] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class CarryPlan:
    """What turns the fork's pristine dir into the agent's: ``delete`` first, then extract ``carry``
    (absolute paths, parents first) from the agent's archive."""

    delete: tuple[str, ...]
    carry: tuple[str, ...]
    skipped_special: int = 0

    @property
    def empty(self) -> bool:
        return not self.delete and not self.carry


def list_archive(
    tar: tarfile.TarFile,
    root: str,
    drop: Callable[[str], bool] | None,
    limits: CarryLimits,
    *,
    keep_members: bool,
) -> Listing:
    """The listing of ``tar``, an archive of the dir ``root`` (absolute) as the archive API writes it
    (members ``<basename>``, ``<basename>/...``). File contents are hashed as they stream (dropped
    ones are not read); ``keep_members`` keeps the TarInfo for ``write_carry``."""
    listing = Listing()
    parent = posixpath.dirname(root)
    skipped: set[str] = set()
    count = 0
    for member in tar:
        count += 1
        if count > limits.max_members:
            raise CarryRefused(
                f"the archive of {root} has more than {limits.max_members} entries", "too_many_entries"
            )
        path = _absolute(member.name, parent, root)
        if path == root:
            continue
        if skipped and any(a in skipped for a in _parents(path, root)):
            continue
        if drop is not None and drop(path):
            skipped.add(path)
            listing.dropped.append(path)
            continue
        if path in listing.entries:
            raise CarryRefused(f"the archive of {root} names {path!r} twice")
        listing.entries[path] = _entry(tar, member, keep_members)
    return listing


def _absolute(name: str, parent: str, root: str) -> str:
    try:
        rel = member_path(name)
    except LayerRefused as exc:
        raise CarryRefused(f"archive member {name[:200]!r}: {exc}") from None
    path = posixpath.join(parent, rel) if rel else parent
    if not _within(path, root):
        raise CarryRefused(f"archive member {name[:200]!r} is outside {root}")
    return path


def _entry(tar: tarfile.TarFile, member: tarfile.TarInfo, keep: bool) -> Entry:
    mode = member.mode & 0o7777 & ~STRIPPED_BITS
    kept = member if keep else None
    if member.isdir():
        return Entry("dir", mode, member=kept)
    if member.issym():
        return Entry("link", 0, member.linkname, kept)
    if member.isreg() or member.islnk():
        try:
            handle = tar.extractfile(member)
        except (KeyError, tarfile.StreamError):  # a hard link to a member that is not there
            handle = None
        if handle is None:
            return Entry("special", 0)
        digest, size = hashlib.sha256(), 0
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
            size += len(chunk)
        return Entry("file", mode, digest.hexdigest(), kept, size)
    return Entry("special", 0)


def plan_carry(agent: Listing, image: Listing, root: str) -> CarryPlan:
    """The deletions and carried paths that make ``image``'s dir the agent's, dropped paths aside.

    A directory of the image that holds a dropped path is never deleted as a whole (its other
    entries are, one by one), and the agent's non-directory in its place is not carried.
    """
    protected = _ancestors(image.dropped, root)
    delete: list[str] = []
    carry: list[str] = []
    gone: list[str] = []  # image dirs deleted as a whole: their children go with them
    specials = 0
    for path in _preorder(set(agent.entries) | set(image.entries)):
        if gone and _within(path, gone[-1]):
            continue
        mine, theirs = agent.entries.get(path), image.entries.get(path)
        if mine is not None and mine.kind == "special":
            if theirs is not None and theirs.kind == "special":
                continue  # the image's own FIFO or device: left as it is
            specials += 1
            mine = None
        if mine is None:
            if theirs is not None and path not in protected:
                delete.append(path)
                gone.append(path)
            continue
        if theirs is None:
            carry.append(path)
        elif mine.same(theirs):
            continue
        elif mine.kind == theirs.kind == "dir":
            carry.append(path)  # its mode changed; its content is compared entry by entry
        elif path in protected:
            continue  # the image's dir holds a dropped path, which wins over the agent's file here
        else:
            delete.append(path)
            if theirs.kind == "dir":
                gone.append(path)
            carry.append(path)
    order = {p: i for i, p in enumerate(agent.entries)}
    return CarryPlan(tuple(delete), tuple(sorted(carry, key=order.__getitem__)), specials)


def check_plan(agent: Listing, plan: CarryPlan, root: str, budget: CarryBudget) -> None:
    """Hold what ``plan`` changes against ``budget`` by the tar headers alone (``OutputRefusedError``):
    every deletion and carried entry counts, a carried entry's kind, mode, size, depth and path are
    checked, and a FIFO, socket or device the agent left is refused."""
    for path in plan.delete:
        budget.visit(path, path.count("/") - root.count("/"))
    for path in plan.carry:
        budget.visit(path, path.count("/") - root.count("/"))
        entry = agent.entries[path]
        member = entry.member
        assert member is not None, "the agent's listing must keep its members"
        kind = stat.S_IFDIR if member.isdir() else stat.S_IFLNK if member.issym() else stat.S_IFREG
        budget.check(path, kind | (member.mode & 0o7777), entry.size)
    if plan.skipped_special:
        raise OutputRefusedError(
            "special_file", f"{plan.skipped_special} FIFOs, sockets or devices below {root}"
        )


def write_carry(
    agent_tar: tarfile.TarFile, agent: Listing, plan: CarryPlan, out: IO[bytes], limits: CarryLimits
) -> int:
    """Write the tar of ``plan.carry`` (names relative to /) to ``out``; returns the bytes of file
    content written. ``agent_tar`` must be open for random access (a hard link is read through)."""
    total = 0
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT, encoding="utf-8") as tar:
        for path in plan.carry:
            entry = agent.entries[path]
            member = entry.member
            assert member is not None, "the agent's listing must keep its members"
            info = tarfile.TarInfo(path.lstrip("/"))
            info.mode, info.uid, info.gid, info.mtime = entry.mode, member.uid, member.gid, member.mtime
            if entry.kind == "dir":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif entry.kind == "link":
                info.type, info.linkname = tarfile.SYMTYPE, entry.content
                tar.addfile(info)
            else:
                handle = agent_tar.extractfile(member)
                assert handle is not None
                info.type, info.size = tarfile.REGTYPE, _size(agent_tar, member)
                total += info.size
                if total > limits.max_carry_bytes:
                    raise CarryRefused(
                        f"the changed files are larger than {limits.max_carry_bytes} bytes", "too_large"
                    )
                tar.addfile(info, handle)
    return total


def _size(tar: tarfile.TarFile, member: tarfile.TarInfo) -> int:
    if member.islnk():
        return tar.getmember(member.linkname).size
    return member.size


def _preorder(paths: Iterable[str]) -> Iterator[str]:
    return iter(sorted(paths, key=lambda p: p.split("/")))


def _parents(path: str, root: str) -> Iterator[str]:
    """The dirs between ``root`` (excluded) and ``path`` (excluded), nearest first."""
    parent = posixpath.dirname(path)
    while parent != root and _within(parent, root):
        yield parent
        parent = posixpath.dirname(parent)


def _ancestors(paths: Iterable[str], root: str) -> set[str]:
    return {parent for path in paths for parent in _parents(path, root)}


def _within(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")
