"""The exported snapshot archive both backends write (``ARCHIVE_FORMAT``), in the parts they share.

An export directory holds ``manifest.json`` and ``diff.tar.gz``; deletions and opaque directories are
OCI whiteout members; the manifest's ``counts`` and ``skipped`` say what the archive holds and what
the export left out. The local and Docker backends read and write each other's layout, so these are
defined once, here, below both.
"""

from __future__ import annotations

import tarfile
from dataclasses import dataclass, field

MANIFEST = "manifest.json"
DIFF = "diff.tar.gz"
MANIFEST_LIMIT = 1 << 20
#: A member name of an OCI layer that marks a deletion, and one that marks an opaque dir.
WHITEOUT_PREFIX = ".wh."
OPAQUE = ".wh..wh..opq"
#: Paths a manifest names among those an export left out.
KEEP_SKIPPED = 20


@dataclass
class Counts:
    """What an archive holds (the manifest's ``counts``) and what the export left out (``skipped``:
    the first ``KEEP_SKIPPED`` paths with why, and how many in all)."""

    files: int = 0
    dirs: int = 0
    symlinks: int = 0
    hardlinks: int = 0
    fifos: int = 0
    whiteouts: int = 0
    opaque_dirs: int = 0
    content_bytes: int = 0
    skipped: list[str] = field(default_factory=list)
    skipped_count: int = 0

    def add(self, member: tarfile.TarInfo, kind: str) -> None:
        if kind == "whiteout":
            self.whiteouts += 1
        elif kind == "opaque":
            self.opaque_dirs += 1
        elif member.isdir():
            self.dirs += 1
        elif member.issym():
            self.symlinks += 1
        elif member.islnk():
            self.hardlinks += 1
        elif member.isfifo():
            self.fifos += 1
        else:
            self.files += 1
            self.content_bytes += member.size

    def skip(self, path: str, why: str) -> None:
        self.skipped_count += 1
        if len(self.skipped) < KEEP_SKIPPED:
            self.skipped.append(f"{path} ({why})")

    def to_dict(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__ if not k.startswith("skipped")}
