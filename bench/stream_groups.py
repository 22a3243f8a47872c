"""What streaming groups costs: ``stream_groups`` against ``run_episodes`` returning a list, on the
same episodes, in one sitting (one uncounted warm-up of each way first).

Two workloads. ``memory``: in-memory environments of ``--steps`` steps whose step yields to the
loop once, so the figure is the runner's and the stream's own cost per group (buffer, backpressure
hook, ready queue). ``humaneval``: HumanEval oracle episodes on the local sandbox, the same path a
trainer takes, so the stream's cost can be set against a real episode's. The two ways alternate
(list, stream, list, ...) ``--repeat`` times so load on the machine falls on both alike. Prints JSON:
median wall time of each way, the ratio stream / list, and the difference per group in microseconds.

    PYTHONPATH=src .venv/bin/python bench/stream_groups.py [--groups 256] [--k 4] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from _common import machine_info
from ares.core.timestep import TimeStep, restart, termination, transition
from ares.llm.types import LLMResponse
from ares.rollout.runner import run_episodes
from ares.rollout.stream import stream_groups


class _Steps:
    """An environment of ``steps`` steps that costs nothing but one yield to the loop per step."""

    def __init__(self, steps: int) -> None:
        self.steps, self.left = steps, 0

    async def reset(self, *, seed: int | None = None, task: Any | None = None) -> TimeStep[str]:
        self.left = self.steps
        return restart("go")

    async def step(self, action: Any) -> TimeStep[str]:
        await asyncio.sleep(0)
        self.left -= 1
        return termination(1.0) if self.left == 0 else transition("more")

    async def close(self) -> None:
        return None


class _Answer:
    async def act(self, observation: Any) -> LLMResponse:
        return LLMResponse(content="ok")


async def _as_list(make_env: Callable[[], Any], policy: Any, episodes: int, k: int, concurrency: int) -> int:
    results = await run_episodes(
        make_env, policy, episodes=episodes, group_size=k, concurrency=concurrency, keep_records=False
    )
    return len(results)


async def _streamed(make_env: Callable[[], Any], policy: Any, episodes: int, k: int, concurrency: int) -> int:
    seen = 0
    async for group in stream_groups(
        make_env,
        policy,
        episodes=episodes,
        group_size=k,
        buffer=8,
        concurrency=concurrency,
        keep_records=False,
    ):
        seen += len(group)
    return seen


def _workload(name: str, args: argparse.Namespace) -> tuple[Callable[[], Any], Any, int, int]:
    if name == "memory":
        return (lambda: _Steps(args.steps)), (lambda task, fmt: _Answer()), args.groups, args.concurrency
    from ares.policies import make_policy
    from ares.presets import make

    tasks = f"0:{args.humaneval_groups}"
    return (lambda: make("humaneval", tasks=tasks)), make_policy("oracle"), args.humaneval_groups, 2


def measure(name: str, args: argparse.Namespace) -> dict[str, Any]:
    make_env, policy, groups, concurrency = _workload(name, args)
    episodes = groups * args.k
    walls: dict[str, list[float]] = {"list": [], "stream": []}
    for play in (_as_list, _streamed):  # warm-up, not counted: imports, the image, the page cache
        asyncio.run(play(make_env, policy, episodes, args.k, concurrency))
    for _ in range(args.repeat):
        for way, play in (("list", _as_list), ("stream", _streamed)):
            began = time.perf_counter()
            done = asyncio.run(play(make_env, policy, episodes, args.k, concurrency))
            walls[way].append(time.perf_counter() - began)
            assert done == episodes, f"{way}: {done} of {episodes} episodes"
    med = {way: statistics.median(values) for way, values in walls.items()}
    return {
        "groups": groups, "k": args.k, "concurrency": concurrency,
        "median_s": {way: round(value, 4) for way, value in med.items()},
        "walls_s": {way: [round(v, 4) for v in values] for way, values in walls.items()},
        "ratio_stream_over_list": round(med["stream"] / med["list"], 4),
        "overhead_per_group_us": round((med["stream"] - med["list"]) / groups * 1e6, 1),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=256, help="groups of the in-memory workload")
    parser.add_argument(
        "--humaneval-groups", type=int, default=16, help="groups (tasks) of the HumanEval one"
    )
    parser.add_argument("--k", type=int, default=4, help="episodes per group")
    parser.add_argument("--steps", type=int, default=5, help="steps per in-memory episode")
    parser.add_argument("--concurrency", type=int, default=64, help="episodes at once (in-memory)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--workloads", default="memory,humaneval")
    args = parser.parse_args()
    out = {"machine": machine_info(), **{name: measure(name, args) for name in args.workloads.split(",")}}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
