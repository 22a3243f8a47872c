"""Host processes a test may call its own: CI runs two pytest processes side by side (one per core), and
a process below the *other* run is that run's business, not a leak of this one.

A process counts as this run's when this pytest is among its ancestors, or when no pytest is (an
orphan reparented to init or a subreaper: a leak is exactly what such checks look for)."""

from __future__ import annotations

import contextlib
import os


def table() -> tuple[dict[int, int], dict[int, bytes]]:
    """Every host process's parent pid and raw command line (NUL-separated), by pid."""
    parents: dict[int, int] = {}
    cmdlines: dict[int, bytes] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdlines[int(entry)] = f.read()
            parents[int(entry)] = int(stat[stat.rfind(b")") + 2 :].split()[1])
    return parents, cmdlines


def _is_pytest(cmdline: bytes) -> bool:
    return any(arg.endswith(b"pytest") or arg.endswith(b"py.test") for arg in cmdline.split(b"\0"))


def processes_with(needle: str) -> list[int]:
    """Pids of this run's processes (see the module docstring) whose command line contains ``needle``
    (arguments joined by spaces)."""
    parents, cmdlines = table()
    me = os.getpid()
    found = []
    for pid, cmdline in cmdlines.items():
        if pid == me or needle.encode() not in cmdline.replace(b"\0", b" "):
            continue
        chain, cur = [], parents.get(pid, 0)
        while cur > 1 and cur not in chain:
            chain.append(cur)
            cur = parents.get(cur, 0)
        if me in chain or not any(_is_pytest(cmdlines.get(p, b"")) for p in chain):
            found.append(pid)
    return sorted(found)
