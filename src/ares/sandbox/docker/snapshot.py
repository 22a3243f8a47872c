"""Snapshots of docker sandboxes: commit a running container, restore and fork it, move it
through files.

- ``snapshot``: the container is paused (when the engine can), its changes are read from the
  engine's diff (``GET /containers/{id}/changes``) and it is committed to an image
  ``ares-snapshot:<random>`` labelled like the verifier's frozen images (``ares.frozen=1``, the
  owner's pid and host), so the janitor removes it at exit and ``ares sandboxes gc`` finds it
  after a crash. The container is unpaused and goes on with its processes.
- ``from_snapshot``: an unstarted sandbox whose container is made from that image. The snapshot
  owns the image, not the sandbox: n of them are a fork.
- ``export`` (``snapshot_listing.py``, ``snapshot_export.py``): the changed paths, read from a
  throwaway container of the snapshot's image with the archive API, written as one ``diff.tar.gz``
  (see ``snapshot_archive``) with a manifest.
- ``import_snapshot`` (``snapshot_import.py``): the archive checked member by member, then a new
  container of the image, committed like a snapshot.
- ``discard``: removes the image, or, while containers of it exist, as soon as the last sandbox made
  from it stops.

A sandbox made from a snapshot remembers its pristine image and the changes its snapshot holds, so
that later snapshots, the verifier's fork and its change summary still compare with the pristine
image, never with the snapshot's.
"""

from __future__ import annotations

import datetime
import logging
import posixpath
import secrets
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import docker
import docker.errors
import docker.utils

from ares.errors import SandboxError
from ares.sandbox.addons import AddonLayer
from ares.sandbox.base import ImageSpec
from ares.sandbox.docker import janitor
from ares.sandbox.docker.client import api_message, run_blocking
from ares.sandbox.docker.engine import DockerEngine
from ares.sandbox.docker.outputs import (
    ADDED,
    DELETED,
    MODIFIED,
    summarize_changes,
    within,
)
from ares.sandbox.snapshots import FilesystemSnapshot

log = logging.getLogger(__name__)


BACKEND = "docker"


SNAPSHOT_REPOSITORY = "ares-snapshot"


SNAPSHOT_LABEL = "ares.snapshot"


Change = tuple[str, int]


# ------------------------------------------------------------------------------------ changes
def path_components(path: str) -> list[str]:
    return path.split("/")


def normalize_changes(changes: Iterable[Mapping[str, Any]] | None) -> list[Change]:
    """The engine's diff as sorted (path, kind) pairs (parents first)."""
    pairs = {posixpath.normpath(str(c["Path"])): int(c["Kind"]) for c in changes or ()}
    pairs.pop("/", None)
    return sorted(pairs.items(), key=lambda pair: path_components(pair[0]))


def merge_changes(inherited: Sequence[Change], current: Iterable[Mapping[str, Any]] | None) -> list[Change]:
    """The changes against the pristine image of a container made from a snapshot: ``inherited``
    (the snapshot's, against the pristine image) followed by ``current`` (the engine's diff of the
    container, against the snapshot's image). A path deleted and made again stays ``DELETED`` (it
    exists: the export sees it as replaced, so the image's old children do not come back)."""
    merged = dict(inherited)
    for path, kind in normalize_changes(current):
        before = merged.get(path)
        if kind == DELETED:
            for gone in [p for p in merged if p != path and within(p, path)]:
                del merged[gone]
            if before == ADDED:
                del merged[path]  # never in the pristine image
            else:
                merged[path] = DELETED
        elif kind == ADDED:
            merged[path] = DELETED if before == DELETED else ADDED
        elif before is None:
            merged[path] = MODIFIED
    return sorted(merged.items(), key=lambda pair: path_components(pair[0]))


def changes_as_dicts(changes: Sequence[Change]) -> list[dict[str, Any]]:
    """(path, kind) pairs in the engine's own form, for ``summarize_changes``."""
    return [{"Path": path, "Kind": kind} for path, kind in changes]


def changes_of(snapshot: FilesystemSnapshot) -> list[Change] | None:
    """The changes a snapshot recorded, None if the engine could not list them."""
    raw = snapshot.metadata.get("changes")
    if raw is None:
        return None
    return [(str(path), int(kind)) for path, kind in raw]


def _counted(changes: Sequence[Change]) -> int:
    """Paths added, changed or deleted, counted like the verifier's summary: not directories that
    only hold other changes, nor the exec wrapper's traces in /tmp."""
    return summarize_changes(changes_as_dicts(changes), (), keep=0).count


def check_backend(snapshot: FilesystemSnapshot) -> None:
    if snapshot.backend != BACKEND:
        raise SandboxError(
            f"snapshot {snapshot.id} is of the {snapshot.backend!r} backend; the docker backend restores "
            "only its own (a snapshot is a diff against one backend's image)"
        )


# ----------------------------------------------------------------------------------- snapshot
#: Striped locks: one snapshot at a time per container (a second pause would fail), many at once
#: across containers.
_freezing = tuple(threading.Lock() for _ in range(64))


def commit_blocking(
    api: docker.APIClient, engine: DockerEngine, container: str, *, running: bool
) -> tuple[list[dict[str, Any]] | None, str, str | None]:
    """Pause ``container`` (if running and the engine can), read its diff, commit it to a tracked
    snapshot image, unpause it. Returns (diff or None, image id, why the diff is missing). Blocking."""
    labels = {**janitor.owner_labels(), janitor.FROZEN_LABEL: "1", SNAPSHOT_LABEL: "1"}
    with _freezing[hash(container) % len(_freezing)]:
        paused = False
        if running:
            try:
                api.pause(container)
                paused = True
            except docker.errors.NotFound:
                raise
            except docker.errors.APIError as exc:  # rootless cgroup v1 has no freezer
                log.info(
                    "cannot pause the sandbox for its snapshot (%s); committing it running", api_message(exc)
                )
        try:
            changes, why = _diff(api, container)
            committed = api.commit(
                container, repository=SNAPSHOT_REPOSITORY, tag=secrets.token_hex(6),
                changes=[f"LABEL {k}={v}" for k, v in labels.items()], pause=False,
            )  # fmt: skip
            image = _full_id(str(committed["Id"]))
            janitor.track_image(image, engine.connector())
            if running and not paused and changes is not None:
                # Writes racing the commit: union with a second look (see the docs' limits).
                after, why = _diff(api, container)
                changes = None if after is None else [*changes, *after]
        finally:
            if paused:
                api.unpause(container)
    return changes, image, why


def _full_id(image: str) -> str:
    """``sha256:<hex>``: Podman's commit answers the bare hex, which its compat API then cannot look
    up once the image is gone (a 500 instead of a 404)."""
    return image if ":" in image else f"sha256:{image}"


def _diff(api: docker.APIClient, container: str) -> tuple[list[dict[str, Any]] | None, str | None]:
    try:
        return list(api.diff(container) or ()), None
    except docker.errors.NotFound:
        raise
    except docker.errors.APIError as exc:  # e.g. podman 4.3 on a file replaced by a directory
        log.warning("the engine cannot list the sandbox's changes: %s", api_message(exc))
        return None, api_message(exc)


def image_size(api: docker.APIClient, image: str) -> int:
    return int(api.inspect_image(image).get("Size") or 0)


def make_snapshot(
    api: docker.APIClient,
    *,
    image: str,
    base: str,
    changes: list[Change] | None,
    why: str | None,
    extra: Mapping[str, Any] | None = None,
) -> FilesystemSnapshot:
    """The FilesystemSnapshot of the committed ``image`` of pristine ``base``. Blocking."""
    size = max(0, image_size(api, image) - image_size(api, base))
    metadata: dict[str, Any] = {
        "changes": None if changes is None else [[p, k] for p, k in changes],
        "created": now_iso(),
        **(extra or {}),
    }
    if why is not None:
        metadata["changes_error"] = why
    return FilesystemSnapshot(
        id=f"docker-{secrets.token_hex(8)}", backend=BACKEND, image=base, ref=image, size_bytes=size,
        changed_paths=_counted(changes) if changes is not None else 0, metadata=metadata,
    )  # fmt: skip


def now_iso() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")


# ------------------------------------------------------------------------------------ discard
#: Images discarded while containers still used them (removed when the last such sandbox stops).
_discarded: set[str] = set()


_discard_lock = threading.Lock()


def is_discarded(image: str) -> bool:
    with _discard_lock:
        return image in _discarded


def discard_blocking(api: docker.APIClient, image: str) -> bool:
    """Remove a snapshot's image now (True), or mark it to go when its last container does. Blocking."""
    with _discard_lock:
        _discarded.add(image)
    return release_blocking(api, image)


def release_blocking(api: docker.APIClient, image: str) -> bool:
    """Remove ``image`` if it was discarded and no container uses it any more. Blocking; True once gone."""
    with _discard_lock:
        if image not in _discarded:
            return False
    try:
        api.inspect_image(image)
        api.remove_image(image)  # not forced: refused while a container of it exists
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        if exc.status_code == 409:  # in use (by a container, or by a later snapshot's image)
            return False
        raise SandboxError(f"cannot remove snapshot image {image[:19]}: {api_message(exc)}") from exc
    with _discard_lock:
        _discarded.discard(image)
    janitor.untrack_image(image)
    return True


async def discard_snapshot(engine: DockerEngine, snapshot: FilesystemSnapshot) -> None:
    check_backend(snapshot)
    client = await engine.client()
    await run_blocking(discard_blocking, client.api, snapshot.ref)


async def check_snapshot_image(
    engine: DockerEngine,
    api: docker.APIClient,
    image: str,
    base: str,
    wanted_image: ImageSpec,
    addons: Sequence[AddonLayer] = (),
) -> None:
    """A sandbox made from a snapshot: its ``image`` still exists and ``wanted_image`` (the spec's) is
    the snapshot's ``base``."""
    if is_discarded(image):
        raise SandboxError(f"the snapshot image {image[:19]} was discarded; no new sandbox can use it")
    wanted = await engine.resolve(wanted_image, addons)
    if wanted != base:
        raise SandboxError(
            f"the snapshot was taken on image {base[:19]}, but this sandbox's spec asks for "
            f"{wanted[:19]} ({wanted_image}); a snapshot restores only onto its own image"
        )
    try:
        await run_blocking(api.inspect_image, image)
    except docker.errors.ImageNotFound:
        raise SandboxError(
            f"the snapshot image {image[:19]} is gone: it was discarded, or removed when the "
            "process that took it exited. Import the snapshot's exported archive instead."
        ) from None
