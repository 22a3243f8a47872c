"""What the Gymnasium adapters cost per step on top of the async environment.

Same env-layer setup as bench/env_throughput.py (in-memory sandbox, an agent that only calls its
LLM, one replayed response), so a step costs microseconds and the adapters' own cost shows:
  async_env       the ARES environment, awaited directly (the baseline)
  async_gym       AsyncAresGymEnv awaited in the same loop (codec, transition, info)
  sync_gym        AresGymEnv from plain sync code (its private loop runs in the caller's thread)
  sync_gym_in_loop  the same called from inside a running event loop (each call hops to a worker)
  vector_N        AresVectorEnv over N envs, steps/s summed over the N sub-environments

    .venv/bin/python bench/gym_overhead.py [--steps 20000] [--episode-steps 200] [--vector 8] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from _common import machine_info
from ares.wrappers.gym import AresGymEnv, AresVectorEnv, AsyncAresGymEnv
from env_throughput import RESPONSE, make_env


async def async_env_rate(total: int, episode_steps: int) -> float:
    env = make_env(episode_steps)
    steps, t0 = 0, time.perf_counter()
    while steps < total:
        ts = await env.reset()
        while not ts.last():
            ts = await env.step(RESPONSE)
            steps += 1
    elapsed = time.perf_counter() - t0
    await env.close()
    return steps / elapsed


async def async_gym_rate(total: int, episode_steps: int) -> float:
    env = AsyncAresGymEnv(make_env(episode_steps))
    steps, t0 = 0, time.perf_counter()
    while steps < total:
        await env.reset()
        done = False
        while not done:
            _, _, terminated, truncated, _ = await env.step(RESPONSE)
            done = terminated or truncated
            steps += 1
    elapsed = time.perf_counter() - t0
    await env.close()
    return steps / elapsed


def sync_gym_rate(total: int, episode_steps: int) -> float:
    env = AresGymEnv(lambda: make_env(episode_steps))
    steps, t0 = 0, time.perf_counter()
    while steps < total:
        env.reset()
        done = False
        while not done:
            _, _, terminated, truncated, _ = env.step(RESPONSE)
            done = terminated or truncated
            steps += 1
    elapsed = time.perf_counter() - t0
    env.close()
    return steps / elapsed


async def sync_gym_in_loop_rate(total: int, episode_steps: int) -> float:
    return sync_gym_rate(total, episode_steps)  # blocking on purpose: what a notebook cell does


def vector_rate(total: int, episode_steps: int, num_envs: int) -> float:
    vec = AresVectorEnv(lambda: make_env(episode_steps), num_envs)
    actions = (RESPONSE,) * num_envs
    vec.reset(seed=0)
    steps, t0 = 0, time.perf_counter()
    while steps < total:
        vec.step(actions)  # NEXT_STEP autoreset keeps every slot busy
        steps += num_envs
    elapsed = time.perf_counter() - t0
    vec.close()
    return steps / elapsed


def main(total: int, episode_steps: int, num_envs: int, repeat: int) -> dict[str, Any]:
    best: dict[str, float] = {}

    def keep(name: str, rate: float) -> None:
        best[name] = max(best.get(name, 0.0), rate)

    asyncio.run(async_env_rate(2000, episode_steps))  # warm-up
    for _ in range(repeat):  # interleaved, best of N
        keep("async_env", asyncio.run(async_env_rate(total, episode_steps)))
        keep("async_gym", asyncio.run(async_gym_rate(total, episode_steps)))
        keep("sync_gym", sync_gym_rate(total, episode_steps))
        keep("sync_gym_in_loop", asyncio.run(sync_gym_in_loop_rate(total, episode_steps)))
        keep(f"vector_{num_envs}", vector_rate(total, episode_steps, num_envs))
    base_us = 1e6 / best["async_env"]
    rows = {
        name: {
            "steps_per_s": round(rate),
            "us_per_step": round(1e6 / rate, 3),
            "overhead_vs_async_env_us": round(1e6 / rate - base_us, 3),
        }
        for name, rate in best.items()
    }
    info = {"bench": "gym_overhead", "machine": machine_info(), "episode_steps": episode_steps}
    return {**info, "variants": rows}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--episode-steps", type=int, default=200)
    parser.add_argument("--vector", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(json.dumps(main(args.steps, args.episode_steps, args.vector, args.repeat), indent=2))
