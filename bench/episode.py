"""Where a HumanEval oracle episode's time goes, and episodes/s at several concurrencies.

Phases, medians over ``--episodes`` episodes played one at a time on the local sandbox:
  reset         ``env.reset()``: sandbox start, task upload, the agent's run up to its first LLM call
  agent         every ``step()`` until LAST, minus what verification and teardown take of the last
  verification  the verifier: frozen fork, its start, the tests, reading the reward
  teardown      ending the episode: agent and client closed, sandbox stopped and deleted
Throughput: ``run_episodes`` of the oracle over the first ``--tasks`` tasks at each concurrency,
and (as root, with a cgroup v1 cpuacct hierarchy) the CPU each episode cost, sandboxes included:
episodes/s follow the machine's other load, CPU per episode much less so.

``--baseline REF`` measures git revision REF side by side (alternating fresh interpreters):

    .venv/bin/python bench/episode.py [--episodes 30] [--tasks 32] [--concurrency 1,2,4,8]
        [--baseline REF --rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

from _common import compare_with, machine_info, side_by_side
from _cpuacct import CpuMeter
from ares import make
from ares.envs import code_env
from ares.policies import make_policy
from ares.rollout.runner import run_episodes

PHASES = ("reset", "agent", "verification", "teardown", "episode")


def _timed(samples: list[float], fn: Any) -> Any:
    """``fn`` (a coroutine function) that appends each call's duration to ``samples``."""

    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await fn(*args, **kwargs)
        finally:
            samples.append(time.perf_counter() - t0)

    return wrapper


async def phase_figures(episodes: int) -> dict[str, Any]:
    """Per-phase medians of oracle episodes at concurrency 1 (the first, warming, episode excluded)."""
    verify_s: list[float] = []
    teardown_s: list[float] = []
    code_env.verify = _timed(verify_s, code_env.verify)  # type: ignore[assignment]
    cls = code_env.CodeEnvironment
    cls._teardown = _timed(teardown_s, cls._teardown)  # type: ignore[method-assign]
    samples: dict[str, list[float]] = {phase: [] for phase in PHASES}
    env = make("humaneval")
    policy_factory = make_policy("oracle")
    async with env:
        for i in range(episodes + 1):
            verify_s.clear()
            teardown_s.clear()
            t0 = time.perf_counter()
            ts = await env.reset(task=i % len(env.tasks))
            t1 = time.perf_counter()
            assert env.task is not None
            policy = policy_factory(env.task, env.action_format)
            while not ts.last():
                ts = await env.step(await policy.act(ts.observation))
            t2 = time.perf_counter()
            if i == 0:
                continue
            verification, teardown = sum(verify_s), sum(teardown_s)
            for phase, value in (
                ("reset", t1 - t0),
                ("agent", t2 - t1 - verification - teardown),
                ("verification", verification),
                ("teardown", teardown),
                ("episode", t2 - t0),
            ):
                samples[phase].append(value)
    return {phase: {"p50_ms": round(statistics.median(v) * 1e3, 2)} for phase, v in samples.items()}


async def throughput(tasks: int, concurrency: int, meter: CpuMeter | None) -> dict[str, float]:
    """Oracle episodes/s over the first ``tasks`` HumanEval tasks at ``concurrency`` (and CPU ms
    per episode, whole process tree, when ``meter`` can tell)."""
    policy_factory = make_policy("oracle")
    used = meter.used_ns() if meter is not None else 0
    t0 = time.perf_counter()
    results = await run_episodes(
        lambda: make("humaneval", tasks=f"0:{tasks}"), policy_factory, episodes=tasks, concurrency=concurrency
    )
    elapsed = time.perf_counter() - t0
    passed = sum(1 for r in results if r.reward == 1.0)
    out = {"episodes_per_s": round(len(results) / elapsed, 3), "passed": passed, "episodes": len(results)}
    if meter is not None:
        out["cpu_ms_per_episode"] = round((meter.used_ns() - used) / 1e6 / len(results), 2)
    return out


async def figures(episodes: int, tasks: int, levels: list[int]) -> dict[str, Any]:
    meter = CpuMeter.open()
    try:
        out: dict[str, Any] = {"phases": await phase_figures(episodes)}
        out["throughput"] = {str(c): await throughput(tasks, c, meter) for c in levels}
    finally:
        if meter is not None:
            meter.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--tasks", type=int, default=32)
    parser.add_argument("--concurrency", default="1,2,4,8")
    parser.add_argument("--baseline", help="git revision to measure side by side with the working tree")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--figures-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    if args.figures_only:
        print(json.dumps(asyncio.run(figures(args.episodes, args.tasks, levels))))
        return
    if args.baseline:
        passed = [
            "--episodes",
            str(args.episodes),
            "--tasks",
            str(args.tasks),
            "--concurrency",
            args.concurrency,
        ]
        runs = compare_with(args.baseline, __file__, passed, args.rounds)
        compared = {p: side_by_side(runs, ("phases", p), ("p50_ms",)) for p in PHASES}
        every = [r["throughput"][str(c)] for rs in runs.values() for r in rs for c in levels]
        cpu = all("cpu_ms_per_episode" in figures for figures in every)
        stats = ("episodes_per_s", "cpu_ms_per_episode") if cpu else ("episodes_per_s",)
        compared |= {f"throughput@{c}": side_by_side(runs, ("throughput", str(c)), stats) for c in levels}
        out = {"baseline_ref": args.baseline, "rounds": args.rounds, "compared": compared}
        print(json.dumps({"bench": "episode", "machine": machine_info(), **out}, indent=2))
        return
    result = asyncio.run(figures(args.episodes, args.tasks, levels))
    print(json.dumps({"bench": "episode", "machine": machine_info(), **result}, indent=2))


if __name__ == "__main__":
    main()
