"""Shared helpers for the benchmark scripts: machine info and percentiles.

Every bench prints one JSON object; the machine block makes figures comparable across runs.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ares.sandbox.base import SandboxFactory, SandboxSpec


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


async def start_exec_figures(
    factory: SandboxFactory, spec: SandboxSpec, starts: int, execs: int
) -> dict[str, Any]:
    """Start/stop p50/p95 over ``starts`` sandboxes, then ``exec true`` over ``execs`` calls in one.

    A first start (which may build or load the image) is excluded.
    """
    warm = factory(spec)  # builds or loads the image; not timed
    await warm.start()
    await warm.stop()
    start_s, stop_s = [], []
    for _ in range(starts):
        sandbox = factory(spec)
        t0 = time.perf_counter()
        await sandbox.start()
        start_s.append(time.perf_counter() - t0)
        await sandbox.exec("true")
        t1 = time.perf_counter()
        await sandbox.stop()
        stop_s.append(time.perf_counter() - t1)
    exec_s = []
    sandbox = factory(spec)
    await sandbox.start()
    try:
        for _ in range(5):
            await sandbox.exec("true")
        for _ in range(execs):
            t0 = time.perf_counter()
            result = await sandbox.exec("true")
            exec_s.append(time.perf_counter() - t0)
            assert result.exit_code == 0
    finally:
        await sandbox.stop()
    return {"start": summarize_ms(start_s), "stop": summarize_ms(stop_s), "exec_true": summarize_ms(exec_s)}


ROOT = Path(__file__).resolve().parents[1]


def figures_in_subprocess(script: str, src: Path, args: list[str]) -> dict[str, Any]:
    """``script --figures-only ARGS``'s JSON, from a fresh interpreter importing ``ares`` from ``src``."""
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{Path(script).parent}"}
    argv = [sys.executable, script, "--figures-only", *args]
    out = subprocess.run(argv, env=env, cwd=tempfile.gettempdir(), check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def compare_with(ref: str, script: str, args: list[str], rounds: int) -> dict[str, list[dict[str, Any]]]:
    """Alternating rounds of git revision ``ref`` (its ``src/`` exported) and the working tree, each in
    a fresh interpreter, so a change is judged against its parent on the same machine in one run."""
    with tempfile.TemporaryDirectory(prefix="ares-bench-baseline-") as tmp:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", ref, "src"], check=True, capture_output=True
        )
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        runs: dict[str, list[dict[str, Any]]] = {"baseline": [], "current": []}
        for _ in range(rounds):
            runs["baseline"].append(figures_in_subprocess(script, Path(tmp) / "src", args))
            runs["current"].append(figures_in_subprocess(script, ROOT / "src", args))
    return runs


def side_by_side(
    runs: dict[str, list[dict[str, Any]]], path: tuple[str, ...], stats: tuple[str, ...]
) -> dict[str, Any]:
    """Each side's ``stats`` at ``path`` in the figures, averaged over rounds, and the first's change."""

    def at(figures: dict[str, Any]) -> dict[str, Any]:
        for key in path:
            figures = figures[key]
        return figures

    side: dict[str, Any] = {
        label: {stat: round(statistics.fmean(at(r)[stat] for r in results), 4) for stat in stats}
        for label, results in runs.items()
    }
    first = stats[0]
    side[f"{first}_change_pct"] = round(100 * (side["current"][first] / side["baseline"][first] - 1), 1)
    return side
