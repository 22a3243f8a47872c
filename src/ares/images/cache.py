"""The content-addressed image cache: layers, image records, bases and locks under one directory.

Layout (``~/.cache/ares`` unless ``ARES_CACHE_DIR`` or ``XDG_CACHE_HOME`` say otherwise)::

    layers/<key>/layer.json   what the step was, the image config after it, its size
    layers/<key>/fs/          its filesystem diff (one dir per overlay mount), absent for config-only steps
    images/<key>.json         a built image: its chain of layer keys, tags, Dockerfile dir
    bases/<name>/             base root filesystems (e.g. Debian by debootstrap)
    logs/                     build logs
    locks/, tmp/              cross-process locks and scratch space on the same filesystem as layers

A layer is published with one ``rename`` of a finished directory, so readers never see half a layer.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import secrets
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ares.core.rmtree import remove_tree
from ares.images.config import ImageConfig
from ares.images.scratch import sweep_dead


def default_cache_dir() -> Path:
    if override := os.environ.get("ARES_CACHE_DIR"):
        return Path(override)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "ares"


@dataclass(frozen=True, slots=True)
class LayerRecord:
    """One cached build step."""

    key: str
    parent: str
    instruction: str
    config: ImageConfig
    has_fs: bool
    size_bytes: int
    created: float
    duration_s: float

    def to_json(self) -> str:
        data = asdict(self)
        data["config"] = self.config.to_dict()
        return json.dumps(data, indent=1)

    @classmethod
    def from_json(cls, text: str) -> LayerRecord:
        data = json.loads(text)
        data["config"] = ImageConfig.from_dict(data["config"])
        return cls(**data)


@dataclass(frozen=True, slots=True)
class ImageRecord:
    """A built image: the base it starts from and its layer keys, bottom to top."""

    key: str
    base: str
    layers: tuple[str, ...]
    tags: tuple[str, ...]
    source: str
    created: float
    last_used: float
    #: Named images a stand-in served instead (``{"requested", "served_by", "reason"}`` each).
    substitutions: tuple[dict[str, str], ...] = ()

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> ImageRecord:
        data: dict[str, Any] = json.loads(text)
        data["layers"], data["tags"] = tuple(data["layers"]), tuple(data["tags"])
        data["substitutions"] = tuple(data.get("substitutions") or ())
        return cls(**data)


class ImageCache:
    """Files of the cache plus the locks that make concurrent builds of one image build it once."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = (root or default_cache_dir()).absolute()
        self._locks: dict[str, asyncio.Lock] = {}
        self._scratch: Path | None = None

    def _dir(self, name: str) -> Path:
        path = self.root / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    # ------------------------------------------------------------------ layers
    def layer_dir(self, key: str) -> Path:
        return self.root / "layers" / key

    def layer(self, key: str) -> LayerRecord | None:
        try:
            return LayerRecord.from_json((self.layer_dir(key) / "layer.json").read_text())
        except FileNotFoundError:
            return None

    def publish_layer(self, staged: Path, record: LayerRecord) -> None:
        """Move a finished staging dir (with ``fs/`` if any) into place as layer ``record.key``."""
        (staged / "layer.json").write_text(record.to_json())
        target = self.layer_dir(record.key)
        self._dir("layers")
        try:
            os.rename(staged, target)
        except OSError:  # someone else published it first; theirs is as good as ours
            remove_tree(staged)

    # ------------------------------------------------------------------ images
    def save_image(self, record: ImageRecord) -> None:
        path = self._dir("images") / f"{record.key}.json"
        old = self.image(record.key)
        if old is not None:
            tags = tuple(dict.fromkeys((*old.tags, *record.tags)))
            record = ImageRecord(**{**asdict(record), "tags": tags, "created": old.created})
        tmp = path.with_suffix(f".{secrets.token_hex(4)}.tmp")
        tmp.write_text(record.to_json())
        os.replace(tmp, path)

    def image(self, key: str) -> ImageRecord | None:
        try:
            return ImageRecord.from_json((self.root / "images" / f"{key}.json").read_text())
        except FileNotFoundError:
            return None

    def images(self) -> list[ImageRecord]:
        folder = self.root / "images"
        if not folder.is_dir():
            return []
        records = [ImageRecord.from_json(p.read_text()) for p in sorted(folder.glob("*.json"))]
        return sorted(records, key=lambda r: r.last_used, reverse=True)

    def find(self, name: str) -> ImageRecord | None:
        """An image by tag, full key or unique key prefix."""
        records = self.images()
        for record in records:
            if name in record.tags:
                return record
        matches = [r for r in records if r.key.startswith(name)]
        return matches[0] if len(matches) == 1 else None

    # ------------------------------------------------------------------ housekeeping
    def scratch(self) -> Path:
        """This process's staging dir inside the cache (same filesystem, so publishing is a rename)."""
        if self._scratch is None or not self._scratch.name.startswith(f"{os.getpid()}-"):
            tmp = self._dir("tmp")
            sweep_dead(tmp)
            self._scratch = tmp / f"{os.getpid()}-{secrets.token_hex(4)}"
            self._scratch.mkdir()
            import atexit

            atexit.register(remove_tree, self._scratch)
        return self._scratch

    def log_path(self, label: str) -> Path:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in label)[-60:]
        return self._dir("logs") / f"{stamp}-{safe}-{secrets.token_hex(2)}.log"

    def size_bytes(self, path: Path) -> int:
        total = 0
        for dirpath, _dirs, files in os.walk(path):
            for name in files:
                with contextlib.suppress(OSError):
                    total += os.lstat(os.path.join(dirpath, name)).st_size
        return total

    def prune(self, *, everything: bool = False) -> list[str]:
        """Delete layers no image uses (or all images and layers); returns what was removed."""
        removed: list[str] = []
        keep: set[str] = set()
        for record in self.images():
            if everything:
                (self.root / "images" / f"{record.key}.json").unlink(missing_ok=True)
                removed.append(f"image {record.key[:12]} {' '.join(record.tags)}".strip())
            else:
                keep.update(record.layers)
        layers = self.root / "layers"
        for entry in sorted(layers.iterdir()) if layers.is_dir() else []:
            if entry.name not in keep:
                remove_tree(entry)
                removed.append(f"layer {entry.name[:12]}")
        tmp = self.root / "tmp"
        if tmp.is_dir():
            sweep_dead(tmp)
        return removed

    # ------------------------------------------------------------------ locks
    @contextlib.asynccontextmanager
    async def lock(self, name: str) -> AsyncIterator[None]:
        """Held by one task of one process at a time, across processes (flock)."""
        local = self._locks.setdefault(name, asyncio.Lock())
        async with local:
            path = self._dir("locks") / f"{name}.lock"
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                while True:  # polling keeps cancellation clean (no thread left blocked in flock)
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        await asyncio.sleep(0.05)
                yield
            finally:
                os.close(fd)  # closing releases the flock


@contextlib.contextmanager
def staged_dir(cache: ImageCache) -> Iterator[Path]:
    """A fresh dir in the cache's scratch space, removed unless it was renamed away."""
    path = cache.scratch() / secrets.token_hex(6)
    path.mkdir()
    try:
        yield path
    finally:
        if path.exists():
            remove_tree(path)
