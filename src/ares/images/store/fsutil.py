"""Small filesystem tools of the store: private dirs, atomic JSON files, cross-process locks.

The store holds trees owned by (canonical) root with setuid bits, so every dir on the way to them is
0700 and owned by the invoking user: no other host user can reach a setuid binary in it.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import secrets
import weakref
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from ares.images.errors import ImageError

PRIVATE = 0o700
_POLL_S = 0.05

#: One asyncio.Lock per (event loop, lock file): coroutines of a process queue without polling.
_loop_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Lock]] = (
    weakref.WeakKeyDictionary()
)


def private_dir(path: Path) -> Path:
    """``path`` as a 0700 dir owned by this user (made if missing); ImageError if another user owns it."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, PRIVATE)
    st = os.lstat(path)
    if not os.path.isdir(path) or os.path.islink(path):
        raise ImageError(f"image store: {path} is not a directory")
    if st.st_uid != os.geteuid():
        raise ImageError(
            f"image store: {path} is owned by uid {st.st_uid}, not by this user ({os.geteuid()}); "
            "use a store of your own (--cache-dir or ARES_CACHE_DIR)"
        )
    if st.st_mode & 0o777 != PRIVATE:
        os.chmod(path, PRIVATE)
    return path


def write_json(path: Path, data: Any) -> None:
    """Replace ``path`` atomically (readers see the old or the new file, never half of one)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, "x", encoding="utf-8") as handle:
            json.dump(data, handle, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_json(path: Path) -> Any | None:
    """The JSON in ``path``, or None when it is missing or unreadable (a store keeps going)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, ValueError):
        return None


def _local_lock(path: Path) -> asyncio.Lock:
    loop = asyncio.get_running_loop()
    locks = _loop_locks.setdefault(loop, {})
    return locks.setdefault(str(path), asyncio.Lock())


@contextlib.asynccontextmanager
async def file_lock(path: Path, *, shared: bool = False) -> AsyncIterator[None]:
    """A flock on ``path``: exclusive (one holder across tasks and processes) or shared.

    Exclusive holders in this process queue on an asyncio.Lock first, so they do not poll each
    other. Waiting polls (no thread is left blocked in flock when the task is cancelled).
    """
    local = contextlib.nullcontext() if shared else _local_lock(path)
    async with local:  # type: ignore[attr-defined]
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            mode = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB
            while True:
                try:
                    fcntl.flock(fd, mode)
                    break
                except BlockingIOError:
                    await asyncio.sleep(_POLL_S)
            yield
        finally:
            os.close(fd)  # closing releases the flock
