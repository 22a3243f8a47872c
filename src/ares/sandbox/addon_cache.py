"""The host-side cache of add-on layers: each ``AddonLayer.key`` is populated once, then reused.

Layout (under the ARES cache, ``$ARES_CACHE_DIR`` or ``~/.cache/ares``)::

    addons/<key>/_root/<mount>/...   the files, as an overlay diff dir (one subdir per mount key)
    addons/<key>/.complete           written last (JSON: the key, the largest program's size): a dir
                                     without it is a failed or running fill
    addons/<key>.lock                held (flock) while one process fills the key

A fill goes to a temp dir first and is renamed into place, so a crash leaves no half layer, and two
processes (or sandboxes) asking for the same key fill it once. Files are made world-readable: a
sandbox's root is an unprivileged id on the host.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

from ares.core.rmtree import remove_tree
from ares.images.cache import default_cache_dir
from ares.sandbox.addons import AddonLayer

ROOT_KEY = "_root"
COMPLETE = ".complete"
#: How often a process waiting for another's fill of the same key checks its lock.
LOCK_POLL_S = 0.1


def addons_dir(cache_dir: Path | None = None) -> Path:
    return (cache_dir or default_cache_dir()) / "addons"


def content_dir(layer_dir: Path, layer: AddonLayer) -> Path:
    """Where ``layer``'s files are inside its cached diff dir."""
    return layer_dir / ROOT_KEY / layer.mount.strip("/")


async def ensure_addon(layer: AddonLayer, cache_dir: Path | None = None) -> Path:
    """The cached diff dir of ``layer`` (``<key>/`` holding ``_root/<mount>``), filled on first use."""
    root = addons_dir(cache_dir)
    done = root / layer.key
    if (done / COMPLETE).is_file():
        return done
    await asyncio.to_thread(root.mkdir, parents=True, exist_ok=True)
    lock_fd = await asyncio.to_thread(os.open, root / f"{layer.key}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        await _lock(lock_fd)
        if (done / COMPLETE).is_file():  # another process filled it while we waited
            return done
        staging = root / f".{layer.key}.{secrets.token_hex(4)}"
        try:
            target = content_dir(staging, layer)
            await asyncio.to_thread(target.mkdir, parents=True)
            await layer.source.populate(target)
            largest = await asyncio.to_thread(_open_up, staging)
            record = {"key": layer.key, "largest_program_bytes": largest}
            (staging / COMPLETE).write_text(json.dumps(record) + "\n")
            if done.exists():  # a stale, incomplete dir from a crashed fill
                await asyncio.to_thread(remove_tree, done)
            await asyncio.to_thread(os.rename, staging, done)
        finally:
            if staging.exists():
                await asyncio.to_thread(remove_tree, staging)
        return done
    finally:
        os.close(lock_fd)


async def _lock(fd: int) -> None:
    """Take the fill lock, polling: a blocking ``flock`` in a worker thread per waiting episode would
    use up the default executor, and the holder then waits forever for a thread to finish its fill."""
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            await asyncio.sleep(LOCK_POLL_S)


def largest_program_mib(layer_dir: Path) -> int:
    """The size (MiB, rounded up) of the largest executable file in a filled layer: what a process
    running it maps, which an address-space limit counts (``SandboxLimits.mapped_mb``)."""
    try:
        size = int(json.loads((layer_dir / COMPLETE).read_text())["largest_program_bytes"])
    except (OSError, ValueError, KeyError, TypeError):  # filled by an older ARES: measure it now
        size = max((st.st_size for st in _executables(layer_dir)), default=0)
    return -(-size // (1 << 20))


def _executables(path: Path) -> Iterator[os.stat_result]:
    for dirpath, _dirs, filenames in os.walk(path):
        for name in filenames:
            st = os.lstat(os.path.join(dirpath, name))
            if stat.S_ISREG(st.st_mode) and st.st_mode & 0o111:
                yield st


def _open_up(path: Path) -> int:
    """Dirs and files readable (and dirs/executables enterable) by anyone, nothing writable but by us;
    returns the size of the largest executable file."""
    largest = 0
    for dirpath, _dirs, filenames in os.walk(path):  # never follows a symlink
        os.chmod(dirpath, 0o755)
        for name in filenames:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            if stat.S_ISREG(st.st_mode):
                executable = bool(st.st_mode & 0o111)
                os.chmod(full, 0o755 if executable else 0o644)
                largest = max(largest, st.st_size) if executable else largest
    return largest
