"""Shared helpers for the benchmark scripts: machine info and percentiles.

Every bench prints one JSON object; the machine block makes figures comparable across runs.
"""

from __future__ import annotations

import datetime
import os
import platform
import statistics
import sys
from typing import Any


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_info() -> dict[str, Any]:
    """CPU, cores, kernel, Python and load, so a reader can judge how noisy a figure may be."""
    return {
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "loadavg_1m_5m_15m": [round(x, 2) for x in os.getloadavg()],
    }


def summarize_ms(samples_s: list[float]) -> dict[str, float]:
    """p50/p95/mean/min in milliseconds; p95 by nearest rank so small samples stay honest."""
    ordered = sorted(samples_s)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {
        "n": len(ordered),
        "p50_ms": round(statistics.median(ordered) * 1e3, 4),
        "p95_ms": round(p95 * 1e3, 4),
        "mean_ms": round(statistics.fmean(ordered) * 1e3, 4),
        "min_ms": round(ordered[0] * 1e3, 4),
    }
