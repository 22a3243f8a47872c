"""The verifier's view of a stopped agent container: what changed outside the task's outputs, and
the outputs themselves, carried into a fresh container of the pristine image.

Nothing here runs a program of the agent's container: its changes come from the engine's diff API
and its files from the archive API, both of which work on a stopped container. The ``rm``/``mkdir``
that clear the outputs' place in the fresh container (under the exec wrapper) are the pristine
image's. The semantics follow the local backend's ``diff.py``: the same summary labels, and an
output path that is a symlink in the agent's container is not carried (the image's version stays).
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import docker
import docker.errors
import docker.utils

from ares.errors import SandboxError
from ares.sandbox.base import DiffSummary
from ares.sandbox.output_paths import output_roots as output_roots  # re-exported for the docker modules
from ares.sandbox.output_paths import within as within

#: The engine's change kinds (``GET /containers/{id}/changes``).
MODIFIED, ADDED, DELETED = 0, 1, 2
#: Paths a summary keeps by name (as the local backend's).
KEEP_PATHS = 20
#: Go's ``os.ModeSymlink`` in the archive API's stat header.
MODE_SYMLINK = 1 << 27
#: What the exec wrapper leaves behind in every container (its scratch dirs, and /tmp itself).
EXEC_SCRATCH = "/tmp/.ares-exec-"

OutputState = Literal["carry", "deleted", "link"]


def summarize_changes(
    changes: Iterable[Mapping[str, Any]] | None,
    outputs: Sequence[str],
    *,
    baseline: Iterable[Mapping[str, Any]] | None = (),
    keep: int = KEEP_PATHS,
) -> DiffSummary:
    """The engine's ``changes`` of a container outside ``outputs``, labelled like the local diff.

    ``baseline`` are the changes a just-started container of the same engine shows by itself (the
    runtime's mount points, e.g. a modified /etc on Podman); they are not counted, and neither are
    the exec wrapper's traces in /tmp. A directory that only holds other changes is not listed (its
    children are); a deleted directory with new children is ``" (replaced)"``.
    """
    noise = {(posixpath.normpath(c["Path"]), int(c["Kind"])) for c in baseline or ()}
    kinds = {posixpath.normpath(c["Path"]): int(c["Kind"]) for c in changes or ()}
    parents: set[str] = set()
    for path in kinds:
        parent = posixpath.dirname(path)
        while parent != "/" and parent not in parents:
            parents.add(parent)
            parent = posixpath.dirname(parent)
    inside = tuple(posixpath.normpath(p) for p in outputs)
    count, paths = 0, []
    for path in sorted(kinds, key=lambda p: p.split("/")):  # component-wise: a pre-order walk
        kind, holds = kinds[path], path in parents
        if (path, kind) in noise or path.startswith(EXEC_SCRATCH) or (path == "/tmp" and kind == MODIFIED):
            continue
        if any(within(path, p) for p in inside):
            continue
        if kind == DELETED:
            label = " (replaced)" if holds else " (deleted)"
        elif holds:
            continue
        else:
            label = ""
        count += 1
        if len(paths) < keep:
            paths.append(path + label)
    return DiffSummary(count, tuple(paths))


def stat_path(api: docker.APIClient, container: str, path: str) -> dict[str, Any] | None:
    """The archive API's stat of ``path`` in a (possibly stopped) container; None if it is missing.
    Blocking. A HEAD request: nothing is archived."""
    response = api.head(api._url("/containers/{0}/archive", container), params={"path": path})
    if response.status_code == 404:
        return None
    api._raise_for_status(response)
    header = response.headers.get("x-docker-container-path-stat")
    if not header:
        raise SandboxError(f"the engine returned no stat for {path}")
    stat: dict[str, Any] = docker.utils.decode_json_header(header)
    return stat


def output_state(stat: Mapping[str, Any] | None) -> OutputState:
    if stat is None:
        return "deleted"
    return "link" if int(stat.get("mode", 0)) & MODE_SYMLINK else "carry"


def clear_script(states: Mapping[str, OutputState]) -> str | None:
    """Shell for the fresh container: remove the image's version of every output that is carried or
    was deleted, and make sure each carried output's parent exists. None if there is nothing to do."""
    gone = [p for p, s in states.items() if s != "link"]
    parents = sorted({posixpath.dirname(p) for p, s in states.items() if s == "carry"})
    if not gone:
        return None
    script = "rm -rf -- " + " ".join(shlex.quote(p) for p in gone)
    if parents:
        script += " && mkdir -p -- " + " ".join(shlex.quote(p) for p in parents)
    return script
