"""What trajectory collection and rollout traces cost per step at the environment layer.

Same setup as bench/env_throughput.py (in-memory sandbox, an agent that only calls its LLM, a
replayed response), so a step costs a few microseconds and any recording overhead shows. Variants:
  bare          CodeEnvironment alone
  plain_wrapper the base Wrapper (one forwarding await per call): the floor of any wrapper
  wrapped_off   TrajectoryCollectingEnvironment, NullCollector, trace="off"
  null_full     NullCollector, trace="full" (builds the trace, writes nothing)
  jsonl_full    JsonlCollector (encode + append + fsync per event), trace="full"
  jsondir_full  JsonDirCollector (rewrite + fsync the episode file per event), trace="full"
Target: overhead of collection + full tracing <= 5% of the bare step time; off ~ 0.
For the JSON collectors the clock stops only after ``flush()``, so the writer thread's encoding and
I/O are counted, not just the hot path.

A second phase runs the same comparison on a real environment step: humaneval on the default local
sandbox, the bash agent, a policy that always answers ``true`` (one sandbox command per step).

    .venv/bin/python bench/records_overhead.py [--steps 20000] [--episode-steps 200] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ares
from _common import machine_info, summarize_ms
from ares.agents.bash import BashActionFormat
from ares.core.environment import Environment
from ares.core.wrapper import Wrapper
from ares.policies.scripted import ReplayPolicy
from ares.records import JsonDirCollector, JsonlCollector, NullCollector, TrajectoryCollectingEnvironment
from env_throughput import RESPONSE, make_env


async def steps_per_s(build: Callable[[], Environment[Any, Any]], total: int) -> float:
    env = build()
    policy = ReplayPolicy([], RESPONSE)
    steps = 0
    t0 = time.perf_counter()
    while steps < total:
        ts = await env.reset()
        while not ts.last():
            ts = await env.step(await policy.act(ts.observation))  # type: ignore[arg-type]
            steps += 1
    collector = getattr(env, "collector", None)
    if collector is not None:
        collector.flush()  # the writer thread's encoding and I/O count too
    elapsed = time.perf_counter() - t0
    await env.close()
    return steps / elapsed


async def real_step_ms(collecting: bool, scratch: Path, episodes: int, steps: int) -> list[float]:
    """Per-step wall times (s) of real humaneval steps on the local sandbox, ``true`` as the action."""
    env: Environment[Any, Any] = ares.make("humaneval", tasks="0:1", step_limit=steps + 1)
    if collecting:
        env = TrajectoryCollectingEnvironment(env, JsonDirCollector(scratch / "real"), trace="full")
    action = BashActionFormat().command("true")
    times: list[float] = []
    async with env:
        for _ in range(episodes):
            await env.reset(task=0)
            for _ in range(steps):
                t0 = time.perf_counter()
                await env.step(action)
                times.append(time.perf_counter() - t0)
            getattr(env, "collector", NullCollector()).flush()
    return times


async def real_phase(scratch: Path, rounds: int) -> dict[str, Any]:
    """Interleaved rounds (drift in machine load hits both alike); per variant the median of each
    round's median step time too, which is robust to the odd slow round."""
    samples: dict[str, list[float]] = {"bare": [], "jsondir_full": []}
    round_medians: dict[str, list[float]] = {"bare": [], "jsondir_full": []}
    for _ in range(rounds):
        for name in samples:
            times = await real_step_ms(name != "bare", scratch, 1, 40)
            samples[name] += times
            round_medians[name].append(statistics.median(times))
    figures = {name: summarize_ms(values) for name, values in samples.items()}
    for name, medians in round_medians.items():
        figures[name]["median_of_round_p50_ms"] = round(statistics.median(medians) * 1e3, 4)
    bare, full = (figures[n]["median_of_round_p50_ms"] for n in ("bare", "jsondir_full"))
    figures["overhead_pct"] = round((full - bare) / bare * 100, 1)
    return figures


async def main(total: int, episode_steps: int, repeat: int) -> dict[str, Any]:
    scratch = Path(tempfile.mkdtemp(prefix="ares-bench-records-"))
    variants: dict[str, Callable[[], Environment[Any, Any]]] = {
        "bare": lambda: make_env(episode_steps),
        "plain_wrapper": lambda: Wrapper(make_env(episode_steps)),
        "wrapped_off": lambda: TrajectoryCollectingEnvironment(
            make_env(episode_steps), NullCollector(), trace="off"
        ),
        "null_full": lambda: TrajectoryCollectingEnvironment(
            make_env(episode_steps), NullCollector(), trace="full"
        ),
        "jsonl_full": lambda: TrajectoryCollectingEnvironment(
            make_env(episode_steps), JsonlCollector(scratch / "t.jsonl"), trace="full"
        ),
        "jsondir_full": lambda: TrajectoryCollectingEnvironment(
            make_env(episode_steps), JsonDirCollector(scratch / "dir"), trace="full"
        ),
    }
    try:
        await steps_per_s(variants["bare"], 2000)  # warm-up
        best: dict[str, float] = {}
        for _ in range(repeat):  # interleaved, best of N: the least disturbed run of each
            for name, build in variants.items():
                n = total if not name.startswith("json") else max(1000, total // 10)
                best[name] = max(best.get(name, 0.0), await steps_per_s(build, n))
        real = await real_phase(scratch, rounds=10 * repeat)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    bare_us = 1e6 / best["bare"]
    rows = {
        name: {
            "steps_per_s": round(rate),
            "us_per_step": round(1e6 / rate, 3),
            "overhead_vs_bare_pct": round((1e6 / rate - bare_us) / bare_us * 100, 1),
        }
        for name, rate in best.items()
    }
    return {
        "bench": "records_overhead",
        "machine": machine_info(),
        "episode_steps": episode_steps,
        "variants": rows,
        "real_step_ms": real,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--episode-steps", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.steps, args.episode_steps, args.repeat)), indent=2))
