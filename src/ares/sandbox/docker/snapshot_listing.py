"""What an exported docker snapshot holds, listed in a throwaway container of the snapshot's image.

Podman's archive API reports every file as owned by root and follows a symlink that is the archived
path itself, so owners and link targets come from a ``find`` listing in that container (the
snapshot's own GNU find; without it, from the engine's stat). ``snapshot_export.py`` writes the
archive from this listing.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import docker
import docker.errors
import docker.utils

from ares.errors import SandboxError
from ares.sandbox.docker.client import api_message
from ares.sandbox.docker.outputs import (
    ADDED,
    DELETED,
    EXEC_SCRATCH,
    MODE_SYMLINK,
    within,
)
from ares.sandbox.docker.snapshot import Change, log, path_components

#: One exec's paths (bytes of argv) when listing or removing many paths.
ARGV_BUDGET = 64 * 1024


#: ``find -printf``: type, uid, gid, permission bits, mtime, path, link target; NUL-separated.
LIST_FORMAT = "%y\\0%U\\0%G\\0%m\\0%T@\\0%p\\0%l\\0"


LIST_FIELDS = 7


#: Go's os.FileMode bits in the archive API's stat header.
GO_DIR, GO_SETUID, GO_SETGID, GO_STICKY = 1 << 31, 1 << 23, 1 << 22, 1 << 20


GO_PIPE, GO_SOCKET, GO_DEVICE, GO_CHARDEV = 1 << 25, 1 << 24, 1 << 26, 1 << 21


# ------------------------------------------------------------------------------------- export
@dataclass(frozen=True, slots=True)
class Listed:
    """One path of the snapshot's image: its type (find's %y letter), owner, mode, mtime, link."""

    type: str
    uid: int | None
    gid: int | None
    mode: int
    mtime: float
    link: str


@dataclass(frozen=True, slots=True)
class ExportItem:
    path: str
    kind: int


def export_plan(changes: Sequence[Change]) -> list[ExportItem]:
    """The top-most changes: an added or deleted path covers everything under it."""
    items: list[ExportItem] = []
    covering: str | None = None
    for path, kind in sorted(changes, key=lambda pair: path_components(pair[0])):
        if path == "/" or path.startswith(EXEC_SCRATCH):
            continue
        if covering is not None and within(path, covering):
            continue
        covering = path if kind in (ADDED, DELETED) else None
        items.append(ExportItem(path, kind))
    return items


def start_and_list(
    api: docker.APIClient, container: str, items: Sequence[ExportItem]
) -> dict[str, Listed] | None:
    """Start the throwaway container and list the exported paths (recursively under added and
    replaced ones) with its ``find``. None when that is impossible (no GNU find, a broken /bin/sh):
    the writer then asks the engine's stat, and owners are what the archives say."""
    try:
        api.start(container)
    except docker.errors.APIError as exc:
        log.info("cannot start a container of the snapshot to list its files: %s", api_message(exc))
        return None
    listing: dict[str, Listed] = {}
    top = ["/", *(item.path for item in items)]  # "/" proves that find and -printf work
    if not _find(api, container, top, ["-maxdepth", "0"], listing) or "/" not in listing:
        return None
    trees = [item.path for item in items if item.kind in (ADDED, DELETED)]
    deep = [path for path in trees if (got := listing.get(path)) is not None and got.type == "d"]
    if deep and not _find(api, container, deep, [], listing):
        return None
    return listing


def _find(
    api: docker.APIClient,
    container: str,
    paths: Sequence[str],
    options: Sequence[str],
    into: dict[str, Listed],
) -> bool:
    for chunk in argv_chunks(paths):
        argv = ["find", *chunk, *options, "-printf", LIST_FORMAT]
        try:
            created = api.exec_create(container, argv, stdout=True, stderr=True, workdir="/")
            stdout, _stderr = api.exec_start(created["Id"], demux=True)
            code = api.exec_inspect(created["Id"]).get("ExitCode")
        except docker.errors.APIError as exc:
            log.info("cannot list the snapshot's files: %s", api_message(exc))
            return False
        if code not in (0, 1):  # 1: some paths are missing, which is what deletions look like
            return False
        fields = (stdout or b"").split(b"\0")
        for start in range(0, len(fields) - LIST_FIELDS + 1, LIST_FIELDS):
            kind, uid, gid, mode, mtime, path, link = (
                f.decode(errors="surrogateescape") for f in fields[start : start + LIST_FIELDS]
            )
            try:
                into[posixpath.normpath(path)] = Listed(
                    kind, int(uid), int(gid), int(mode, 8), float(mtime), link
                )
            except ValueError:
                return False
    return True


def argv_chunks(paths: Sequence[str]) -> Iterator[list[str]]:
    chunk: list[str] = []
    size = 0
    for path in paths:
        if chunk and size + len(path) + 1 > ARGV_BUDGET:
            yield chunk
            chunk, size = [], 0
        chunk.append(path)
        size += len(path) + 1
    if chunk:
        yield chunk


def stat_blocking(api: docker.APIClient, container: str, path: str) -> Listed | None:
    """The archive API's stat of ``path`` (None: it does not exist). Podman answers 404 with a stat
    for a symlink whose target is missing, and resolves ``linkTarget``. Owners are unknown."""
    response = api.head(api._url("/containers/{0}/archive", container), params={"path": path})
    header = response.headers.get("x-docker-container-path-stat")
    if response.status_code == 404 and not header:
        return None
    if response.status_code != 404:
        api._raise_for_status(response)
    if not header:
        raise SandboxError(f"the engine returned no stat for {path}")
    stat = docker.utils.decode_json_header(header)
    go = int(stat.get("mode", 0))
    mode = go & 0o777
    mode |= 0o4000 if go & GO_SETUID else 0
    mode |= 0o2000 if go & GO_SETGID else 0
    mode |= 0o1000 if go & GO_STICKY else 0
    if go & MODE_SYMLINK:
        kind = "l"
    elif go & GO_DIR:
        kind = "d"
    elif go & GO_PIPE:
        kind = "p"
    elif go & (GO_SOCKET | GO_DEVICE | GO_CHARDEV):
        kind = "s"
    else:
        kind = "f"
    link = str(stat.get("linkTarget") or "") if kind == "l" else ""
    return Listed(kind, None, None, mode, 0.0, link)
