"""Local sandbox latency: start/stop time and exec round trip of ``true`` against plain spawns.

The sandbox runs every command as ``bash -c CMD`` inside its namespaces, so the fair floor is a
host ``bash -c true``; a bare ``true`` spawn is reported too as the absolute floor.
Targets: exec p50 within 3x of the plain subprocess spawn; start p50 <= 50 ms.

``--baseline REF`` also measures the sandbox of git revision REF (its ``src/`` exported to a temp
dir), alternating rounds of REF and the working tree in fresh interpreters, so a change is judged
against its parent on the same machine in one run:

    .venv/bin/python bench/sandbox_latency.py [--starts 30] [--execs 300] [--baseline REF --rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import time
from typing import Any

from _common import compare_with, machine_info, side_by_side, summarize_ms
from ares.sandbox.local.sandbox import LocalSandbox


def spawn_baseline(argv: list[str], n: int) -> list[float]:
    for _ in range(5):  # warm the page cache and the allocator
        subprocess.run(argv, check=True)
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(argv, check=True)
        samples.append(time.perf_counter() - t0)
    return samples


async def async_spawn_baseline(n: int) -> list[float]:
    """What an unsandboxed async agent pays: asyncio.create_subprocess_exec of bash -c true."""
    samples = []
    for i in range(n + 5):
        t0 = time.perf_counter()
        proc = await asyncio.create_subprocess_exec("bash", "-c", "true")
        await proc.wait()
        if i >= 5:
            samples.append(time.perf_counter() - t0)
    return samples


async def sandbox_figures(starts: int, execs: int) -> dict[str, Any]:
    # The first start in a process also builds the host base layers; report it apart.
    cold = LocalSandbox()
    t0 = time.perf_counter()
    await cold.start()
    cold_start = time.perf_counter() - t0
    await cold.stop()

    start_s, stop_s = [], []
    for _ in range(starts):
        sb = LocalSandbox()
        t0 = time.perf_counter()
        await sb.start()
        t1 = time.perf_counter()
        await sb.exec("true")  # proves it was ready; not timed
        t2 = time.perf_counter()
        await sb.stop()
        stop_s.append(time.perf_counter() - t2)
        start_s.append(t1 - t0)

    sb = LocalSandbox()
    await sb.start()
    try:
        for _ in range(10):
            await sb.exec("true")
        exec_s, inner_s = [], []
        for _ in range(execs):
            t0 = time.perf_counter()
            result = await sb.exec("true")
            exec_s.append(time.perf_counter() - t0)
            inner_s.append(result.duration_s)
            assert result.exit_code == 0
    finally:
        await sb.stop()
    return {
        "cold_first_start_ms": round(cold_start * 1e3, 3),
        "start": summarize_ms(start_s),
        "stop": summarize_ms(stop_s),
        "exec_true": summarize_ms(exec_s),
        # Measured by the in-sandbox shepherd: spawn and wait of `bash -c true` alone; the rest
        # of the round trip is transport (host <-> init <-> shepherd) and event-loop hops.
        "exec_true_in_sandbox_duration": summarize_ms(inner_s),
        "baseline_asyncio_bash_c_true": summarize_ms(await async_spawn_baseline(execs)),
    }


COMPARED = ("start", "stop", "exec_true", "exec_true_in_sandbox_duration")


def compare(ref: str, rounds: int, starts: int, execs: int) -> dict[str, Any]:
    """Side-by-side p50/p95 of ``ref`` and the working tree (see ``_common.compare_with``)."""
    runs = compare_with(ref, __file__, ["--starts", str(starts), "--execs", str(execs)], rounds)
    table = {name: side_by_side(runs, (name,), ("p50_ms", "p95_ms")) for name in COMPARED}
    return {"baseline_ref": ref, "rounds": rounds, "compared": table}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=30)
    parser.add_argument("--execs", type=int, default=300)
    parser.add_argument("--baseline", help="git revision to measure side by side with the working tree")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds per side with --baseline")
    parser.add_argument("--figures-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.figures_only:
        print(json.dumps(asyncio.run(sandbox_figures(args.starts, args.execs))))
        return
    if args.baseline:
        result = compare(args.baseline, args.rounds, args.starts, args.execs)
        print(json.dumps({"bench": "sandbox_latency", "machine": machine_info(), **result}, indent=2))
        return

    figures = asyncio.run(sandbox_figures(args.starts, args.execs))
    plain = summarize_ms(spawn_baseline(["true"], args.execs))
    bash = summarize_ms(spawn_baseline(["bash", "-c", "true"], args.execs))
    exec_p50 = figures["exec_true"]["p50_ms"]
    start_p50 = figures["start"]["p50_ms"]
    out = {
        "bench": "sandbox_latency",
        "machine": machine_info(),
        **figures,
        "baseline_subprocess_true": plain,
        "baseline_subprocess_bash_c_true": bash,
        "exec_p50_ratio_to_plain_spawn": round(exec_p50 / plain["p50_ms"], 2),
        "exec_p50_ratio_to_bash_c_spawn": round(exec_p50 / bash["p50_ms"], 2),
        "targets": {
            "exec_p50_within_3x_plain_spawn": exec_p50 <= 3 * plain["p50_ms"],
            "start_p50_le_50ms": start_p50 <= 50.0,
        },
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
