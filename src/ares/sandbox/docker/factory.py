"""DockerSandboxFactory: the SandboxFactory of the docker backend."""

from __future__ import annotations

from pathlib import Path

import docker

from ares.sandbox.base import SandboxSpec
from ares.sandbox.capabilities import Capability
from ares.sandbox.docker import snapshot as snapshots
from ares.sandbox.docker import snapshot_export, snapshot_import
from ares.sandbox.docker.engine import DockerConfig, DockerEngine
from ares.sandbox.docker.sandbox import DockerSandbox
from ares.sandbox.snapshots import FilesystemSnapshot


class DockerSandboxFactory:
    """Makes (unstarted) DockerSandboxes that share one engine client and image cache.

    ``make("harbor", path=DIR, sandbox_factory=DockerSandboxFactory())`` runs a dataset's episodes
    in containers; each task's Dockerfile is built once per content hash.

    It also restores snapshots (``DockerSandbox.snapshot()``): ``from_snapshot`` makes a sandbox of
    one, ``export_snapshot``/``import_snapshot`` move one through a directory, ``discard_snapshot``
    frees its image (see ``ares.sandbox.snapshots`` and ``docker/snapshot.py``).
    """

    capabilities = frozenset({Capability.RESTORE})

    def __init__(
        self, config: DockerConfig | None = None, *, client: docker.DockerClient | None = None
    ) -> None:
        self.engine = DockerEngine(config, client=client)

    @property
    def config(self) -> DockerConfig:
        return self.engine.config

    @property
    def built(self) -> list[str]:
        """Image tags built through this factory (reused images are not listed)."""
        return self.engine.built

    def __call__(self, spec: SandboxSpec) -> DockerSandbox:
        return DockerSandbox(spec, engine=self.engine)

    def from_snapshot(self, snapshot: FilesystemSnapshot, spec: SandboxSpec) -> DockerSandbox:
        """An unstarted sandbox of ``spec`` (whose image must be the snapshot's) holding the snapshot's
        files; n calls fork n independent sandboxes."""
        return DockerSandbox.from_snapshot(snapshot, spec, engine=self.engine)

    async def export_snapshot(self, snapshot: FilesystemSnapshot, path: Path) -> None:
        """Write the snapshot's diff to the directory ``path`` (``manifest.json``, ``diff.tar.gz``)."""
        await snapshot_export.export_snapshot(self.engine, snapshot, Path(path))

    async def import_snapshot(self, path: Path, spec: SandboxSpec) -> FilesystemSnapshot:
        """A snapshot of ``spec``'s image from an exported directory; unsafe archives are refused."""
        return await snapshot_import.import_snapshot(self.engine, Path(path), spec)

    async def discard_snapshot(self, snapshot: FilesystemSnapshot) -> None:
        """Remove the snapshot's image now, or when the last sandbox made from it stops."""
        await snapshots.discard_snapshot(self.engine, snapshot)

    def close(self) -> None:
        """Close the engine client. Sandboxes still running keep working until their next call."""
        self.engine.close()
