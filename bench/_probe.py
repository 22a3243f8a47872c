"""What a process holds, sampled cheaply enough to take every few hundred episodes.

``sample()`` reads this process's (or any pid's) RSS, fds and threads from /proc and, for this
process, the Python heap (tracemalloc when tracing, gc-tracked objects) and glibc malloc's own
accounting. The malloc figures split heap growth into memory in use and memory freed but kept
(fragmentation: what ``malloc_trim`` or ``MALLOC_ARENA_MAX`` could change), which RSS alone cannot.
Usable inside a Ray actor too: every figure is about the calling process unless a pid is given.
"""

from __future__ import annotations

import ctypes
import gc
import os
import re
import statistics
import tempfile
import tracemalloc
from typing import Any


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
            "keepcost",
        )
    ]  # fmt: skip


def _libc() -> Any:
    try:
        libc = ctypes.CDLL(None)
        libc.mallinfo2.restype = _MallInfo2
        libc.fdopen.restype = ctypes.c_void_p
        libc.fdopen.argtypes = [ctypes.c_int, ctypes.c_char_p]
        libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
        libc.fclose.argtypes = [ctypes.c_void_p]
        return libc
    except (OSError, AttributeError):  # not glibc (musl, macOS): no malloc figures
        return None


_LIBC = _libc()


def status(pid: int | str = "self") -> dict[str, int]:
    """VmRSS, VmHWM (peak RSS) and Threads from /proc/PID/status, in KiB and counts."""
    wanted = {"VmRSS": "rss_kib", "VmHWM": "hwm_kib", "Threads": "threads"}
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in wanted:
                out[wanted[key]] = int(value.split()[0])
    return out


def fd_count(pid: int | str = "self") -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def malloc_stats() -> dict[str, int]:
    """glibc's view of its heap over all arenas, in KiB: in use, free but kept, mmapped; and the
    number of arenas (each thread that allocates may get its own, up to 8 per core)."""
    if _LIBC is None:
        return {}
    info = _LIBC.mallinfo2()
    return {
        "malloc_in_use_kib": info.uordblks // 1024,
        "malloc_free_kib": info.fordblks // 1024,
        "malloc_mmapped_kib": info.hblkhd // 1024,
        "malloc_arenas": _arena_count(),
    }


def _arena_count() -> int:
    with tempfile.TemporaryFile() as f:
        stream = _LIBC.fdopen(os.dup(f.fileno()), b"w")
        _LIBC.malloc_info(0, stream)
        _LIBC.fclose(stream)
        f.seek(0)
        return len(re.findall(rb"<heap nr=", f.read()))


def malloc_trim() -> bool:
    """Hand free heap memory back to the kernel (all arenas); False when there is no glibc."""
    return _LIBC is not None and bool(_LIBC.malloc_trim(0))


def sample(pid: int | str = "self", *, objects: bool = True) -> dict[str, int]:
    """One sample: RSS, fds, threads; for this process also malloc, tracemalloc and gc figures."""
    out = {**status(pid), "fds": fd_count(pid)}
    if pid != "self":
        return out
    out |= malloc_stats()
    if tracemalloc.is_tracing():
        out["py_traced_kib"] = tracemalloc.get_traced_memory()[0] // 1024
    if objects:  # a full pass over the gc lists: tens of ms at a few 100k objects
        out["gc_objects"] = len(gc.get_objects())
    out["gc_collections"] = sum(s["collections"] for s in gc.get_stats())
    return out


def growth_per_unit(samples: list[dict[str, Any]], x: str, y: str, scale: float = 1.0) -> float | None:
    """Least-squares slope of ``y`` against ``x`` over the samples (times ``scale``)."""
    points = [(s[x], s[y]) for s in samples if y in s]
    if len(points) < 3:
        return None
    xs, ys = zip(*points, strict=True)
    return statistics.linear_regression(xs, ys).slope * scale
