"""CodeEnvironment.reset() latency on the local backend, without and with a warm sandbox pool.

Each episode is reset (timed) and then played to the end by the ``null`` policy (untimed: it submits
at once and the verifier runs), so the pool refills between resets as it would between real episodes.
The first ``--warmup`` resets of each mode are not counted (they build the host base and fill the pool).

    .venv/bin/python bench/reset_latency.py [--episodes 40] [--warmup 3] [--pool-size 1]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import time
from typing import Any

from _common import machine_info, summarize_ms
from ares import make
from ares.envs.code_env import CodeEnvironment
from ares.policies import make_policy
from ares.sandbox.local import LocalSandbox
from ares.sandbox.warm_pool import WarmPool


async def reset_samples(env: CodeEnvironment, episodes: int, warmup: int) -> list[float]:
    null = make_policy("null")
    samples = []
    for index in range(warmup + episodes):
        t0 = time.perf_counter()
        ts = await env.reset(task=index % len(env.tasks))
        elapsed = time.perf_counter() - t0
        assert env.task is not None
        policy = null(env.task, env.action_format)
        while not ts.last():
            ts = await env.step(await policy.act(ts.observation))
        if index >= warmup:
            samples.append(elapsed)
    return samples


async def figures(preset: str, tasks: str, episodes: int, warmup: int, pool_size: int) -> dict[str, Any]:
    async with make(preset, tasks=tasks) as env:
        cold = await reset_samples(env, episodes, warmup)
    async with WarmPool(LocalSandbox, size=pool_size) as pool:
        async with make(preset, tasks=tasks, sandbox_factory=pool) as env:
            warm = await reset_samples(env, episodes, warmup)
        stats = dataclasses.asdict(pool.stats)
    without, with_pool = summarize_ms(cold), summarize_ms(warm)
    return {
        "without_pool": without,
        "with_pool": with_pool,
        "pool_stats": stats,
        "p50_speedup": round(without["p50_ms"] / with_pool["p50_ms"], 2),
        "p95_speedup": round(without["p95_ms"] / with_pool["p95_ms"], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="humaneval")
    parser.add_argument("--tasks", default="0:10", help="Task selection of the preset.")
    parser.add_argument("--episodes", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--pool-size", type=int, default=1)
    args = parser.parse_args()
    result = asyncio.run(figures(args.preset, args.tasks, args.episodes, args.warmup, args.pool_size))
    out = {
        "bench": "reset_latency",
        "machine": machine_info(),
        "preset": args.preset,
        "tasks": args.tasks,
        "pool_size": args.pool_size,
        "warmup_resets_excluded": args.warmup,
        **result,
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
