"""Filesystem snapshots: a sandbox's files at one moment, as a diff against its image.

The seam every backend that can snapshot implements (the local sandbox, Docker):

- ``await sandbox.snapshot()`` freezes what the sandbox changed so far and returns a
  ``FilesystemSnapshot``; the sandbox keeps running on top of it. Files are captured; processes
  are not (see each backend's docs for exactly what is and is not).
- ``factory.from_snapshot(snapshot, spec)`` makes a new, unstarted sandbox of ``spec`` whose
  filesystem is the image plus the snapshot's diff. Calling it n times forks n independent
  sandboxes; none sees another's writes. ``LocalSandbox`` (a class used as its own factory) and
  ``DockerSandboxFactory`` provide it.
- ``await export_snapshot(snapshot, path)`` writes the diff alone as a compressed archive (deletions
  and opaque directories as OCI whiteouts, modes and ownership kept) and
  ``await factory.import_snapshot(path, spec)`` turns such an archive back into a snapshot, in
  another process or on another machine with the same image.
- ``await factory.discard_snapshot(snapshot)`` frees what a snapshot holds once no sandbox made
  from it runs; snapshots are otherwise freed when the process exits (local) or by
  ``ares sandboxes gc`` (Docker).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Version of the exported archive layout (``manifest.json`` + ``diff.tar.gz``).
ARCHIVE_FORMAT = "ares.fs-snapshot/1"

__all__ = ["ARCHIVE_FORMAT", "FilesystemSnapshot"]


@dataclass(frozen=True, slots=True)
class FilesystemSnapshot:
    """A frozen diff of a sandbox against its image.

    ``backend`` names who can restore it ("local", "docker"); ``image`` identifies the image it
    applies to (a local plan digest, a Docker image id): restoring onto another image is refused.
    ``ref`` is the backend's handle (a read-only layer dir, a committed image id). ``size_bytes``
    is the diff's size on disk, ``changed_paths`` how many paths it adds, changes or deletes.
    """

    id: str
    backend: str
    image: str
    ref: str
    size_bytes: int = 0
    changed_paths: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "backend": self.backend, "image": self.image, "ref": self.ref,
            "size_bytes": self.size_bytes, "changed_paths": self.changed_paths, "metadata": self.metadata,
        }  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FilesystemSnapshot:
        return cls(
            id=str(data["id"]), backend=str(data["backend"]), image=str(data["image"]), ref=str(data["ref"]),
            size_bytes=int(data.get("size_bytes", 0)), changed_paths=int(data.get("changed_paths", 0)),
            metadata=dict(data.get("metadata") or {}),
        )  # fmt: skip
