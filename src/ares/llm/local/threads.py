"""How many threads llama.cpp decodes with: by default, the CPUs this process may use that are idle.

llama.cpp's threads meet at a barrier after every layer, so a thread that shares its core with a
busy process holds all the others up: on 2 cores beside one busy-looping process, 2 threads decode
several times slower than 1 (docs/benchmarks.md, "Local model threads"). So, when the model loads,
the count is the CPUs of this process's affinity mask minus those busy over a short window
(``/proc/stat``), at least one. ``threads=N`` (``LocalChatClient``) or ``ARES_LOCAL_THREADS=N``
sets it outright. It is fixed for the model's life (llama.cpp takes it once), so a process that
starts beside the model later is not seen: set it when other work is known to come.
"""

from __future__ import annotations

import os
import time
from collections.abc import Collection

from ares.errors import LLMError

THREADS_ENV = "ARES_LOCAL_THREADS"
#: How long the CPUs are watched for other processes' work.
WINDOW_S = 0.25


def pick_threads(requested: int = 0) -> int:
    """``requested`` if > 0, else ``$ARES_LOCAL_THREADS``, else the idle CPUs (see ``idle_cpus``)."""
    if requested > 0:
        return requested
    env = os.environ.get(THREADS_ENV, "").strip()
    if env:
        if not env.isdigit() or int(env) < 1:
            raise LLMError(f"{THREADS_ENV} must be a whole number >= 1, got {env!r}")
        return int(env)
    return idle_cpus()


def allowed_cpus() -> set[int]:
    """The CPUs this process may run on (all of them where the OS cannot say)."""
    if hasattr(os, "sched_getaffinity"):
        return set(os.sched_getaffinity(0))
    return set(range(os.cpu_count() or 1))


def idle_cpus(window_s: float = WINDOW_S) -> int:
    """The allowed CPUs minus the busy ones (the sum of their busy fractions over ``window_s``,
    rounded), at least 1; every allowed CPU where ``/proc/stat`` cannot be read. Blocks ``window_s``."""
    allowed = allowed_cpus()
    before = _cpu_times(allowed)
    if not before:
        return len(allowed)
    time.sleep(window_s)
    after = _cpu_times(allowed)
    busy = 0.0
    for cpu, (idle0, total0) in before.items():
        idle1, total1 = after.get(cpu, (idle0, total0))
        if total1 > total0:
            busy += 1.0 - (idle1 - idle0) / (total1 - total0)
    return max(1, len(allowed) - round(busy))


def _cpu_times(cpus: Collection[int]) -> dict[int, tuple[int, int]]:
    """cpu -> (idle + iowait ticks, all ticks) from ``/proc/stat``; empty where it cannot be read."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            lines = f.readlines()
    except OSError:
        return {}
    times = {}
    for line in lines:
        name, *fields = line.split()
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus:
            ticks = [int(v) for v in fields[:8]]  # user nice system idle iowait irq softirq steal
            times[int(name[3:])] = (ticks[3] + ticks[4], sum(ticks))
    return times
