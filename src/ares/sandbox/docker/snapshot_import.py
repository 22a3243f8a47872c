"""Import of an exported docker snapshot: the archive checked member by member, then a new container
of the image: the image's own ``rm`` removes whiteouts and opaque dirs (nothing of the archive is in
the container yet), ``put_archive`` writes the rest, and the container is committed like a snapshot
(``snapshot.py``).
"""

from __future__ import annotations

import contextlib
import tarfile
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import docker.errors
import docker.utils

from ares.errors import SandboxError
from ares.sandbox.base import SandboxSpec
from ares.sandbox.docker import janitor
from ares.sandbox.docker.client import run_blocking
from ares.sandbox.docker.containers import create_container
from ares.sandbox.docker.engine import DockerEngine
from ares.sandbox.docker.snapshot import BACKEND, commit_blocking, make_snapshot, normalize_changes
from ares.sandbox.docker.snapshot_archive import (
    DIFF,
    ArchiveError,
    Counts,
    MemberCheck,
    clean_member,
    read_manifest,
)
from ares.sandbox.docker.snapshot_listing import argv_chunks
from ares.sandbox.snapshots import FilesystemSnapshot


# ------------------------------------------------------------------------------------- import
@dataclass
class Checked:
    """A checked archive: what to delete from the image first, and a plain tar of the rest."""

    deletions: list[str]
    tar: Any  # an open temporary file, positioned at 0
    counts: Counts


def check_archive(archive: Path, byte_limit: int | None = None) -> Checked:
    """Check every member of ``archive`` (a .tar.gz) and write the entries to a temporary plain tar.
    Raises ArchiveError naming the first unsafe member, or when the content passes ``byte_limit``
    (the spec's storage limit: a gzip bomb fills no disk). Blocking."""
    check = MemberCheck()
    deletions: list[str] = []
    spool = tempfile.TemporaryFile()  # noqa: SIM115 (handed to the caller open)
    try:
        with (
            tarfile.open(archive, "r|gz") as source,
            tarfile.open(fileobj=spool, mode="w", format=tarfile.PAX_FORMAT) as out,
        ):
            for member in source:
                what, path = check.check(member)
                if what != "entry":
                    deletions.append(path)
                    continue
                if byte_limit is not None and check.counts.content_bytes > byte_limit:
                    raise ArchiveError(
                        f"the archive holds more than the spec's {byte_limit} bytes of storage"
                    )
                data = source.extractfile(member) if member.isreg() else None
                out.addfile(clean_member(member), data)
    except (tarfile.TarError, EOFError, OSError) as exc:
        spool.close()
        raise ArchiveError(f"{archive} is not a readable gzip'd tar: {exc}") from exc
    except BaseException:
        spool.close()
        raise
    spool.seek(0)
    return Checked(deletions, spool, check.counts)


def same_image(manifest: Mapping[str, Any], image: Mapping[str, Any]) -> bool:
    """Whether ``image`` (an inspect) is the manifest's: the same id, or the same layer digests."""
    if manifest.get("image") == image.get("Id"):
        return True
    layers = list((image.get("RootFS") or {}).get("Layers") or ())
    return bool(layers) and layers == list(manifest.get("image_layers") or ())


def import_blocking(
    client: docker.DockerClient, engine: DockerEngine, src: Path, spec: SandboxSpec, base: str
) -> FilesystemSnapshot:
    """Import the export at ``src`` onto ``base`` (the spec's image id). Blocking."""
    api = client.api
    manifest = read_manifest(src, BACKEND)
    image = api.inspect_image(base)
    if not same_image(manifest, image):
        names = ", ".join(manifest.get("image_names") or ()) or "no name"
        have = ", ".join(image.get("RepoTags") or ()) or "no name"
        raise ArchiveError(
            f"the snapshot at {src} applies to image {str(manifest.get('image'))[:19]} ({names}), but the "
            f"spec's image is {base[:19]} ({have}); import it with the image it was taken on"
        )
    storage = spec.resources.storage_mb
    checked = check_archive(src / DIFF, None if storage is None else storage << 20)
    container = create_container(client, engine, spec, base)
    try:
        api.start(container)
        for chunk in argv_chunks(sorted(set(checked.deletions))):
            _run(api, container, ["rm", "-rf", "--", *chunk])  # the image's own rm: nothing else is in yet
        api.put_archive(container, "/", checked.tar)
        changes, committed, why = commit_blocking(api, engine, container, running=False)
    finally:
        checked.tar.close()
        with contextlib.suppress(docker.errors.DockerException):
            api.remove_container(container, force=True, v=True)
        janitor.untrack_container(container)
    source = manifest.get("snapshot")
    extra = {"imported_from": str(src), "source_id": source, "counts": checked.counts.to_dict()}
    listed = None if changes is None else normalize_changes(changes)
    return make_snapshot(api, image=committed, base=base, changes=listed, why=why, extra=extra)


def _run(api: docker.APIClient, container: str, argv: list[str]) -> None:
    created = api.exec_create(container, argv, stdout=True, stderr=True, workdir="/")
    output = api.exec_start(created["Id"])
    code = api.exec_inspect(created["Id"]).get("ExitCode")
    if code != 0:
        text = output.decode(errors="replace").strip()[-500:]
        raise SandboxError(f"removing the snapshot's deletions failed (exit {code}): {text}")


async def import_snapshot(engine: DockerEngine, path: Path, spec: SandboxSpec) -> FilesystemSnapshot:
    client = await engine.client()
    base = await engine.resolve(spec.image, spec.addons)
    try:
        return await run_blocking(import_blocking, client, engine, Path(path), spec, base)
    except ArchiveError as exc:
        raise ArchiveError(f"refusing the snapshot archive {path}: {exc}") from exc
