"""The Ray and span-tracing scenarios of bench/scale.py (registered in its ``SCENARIOS``).

ray      the ``local`` scenario's concurrent episodes (in-process and local-sandbox) through the
         local runner and through ``run_episodes_ray`` on a local Ray instance, side by side:
         throughput, p95 step latency, peak RSS per environment (the actors' processes for Ray),
         and Ray's overhead; then a soak of ``--soak-episodes`` through the actors, sampling each
         actor's RSS, fds and threads (they are named Ray actors) for its growth per episode.
tracing  the same episodes with span tracing at each level (no tracer, off, basic, full):
         episodes/s and step latency; run with ``--baseline REF`` for code without span calls.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _probe
import env_throughput
from _common import summarize_ms
from ares.rollout.results import RunSummary
from ares.rollout.runner import run_episodes

BENCH = Path(__file__).resolve().parent


def _scale() -> Any:
    """bench/scale.py itself (``__main__`` when run as a script), for its environments."""
    return sys.modules.get("scale") or sys.modules["__main__"]


# ----------------------------------------------------------------------------- ray


def _start_ray(cpus: int) -> Any:
    import ray
    from ray import cloudpickle

    # Actors cannot import bench/: ship its modules' environments by value.
    for module in (env_throughput, _probe, sys.modules[__name__]):
        cloudpickle.register_pickle_by_value(module)
    ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False)
    return ray


async def ray_episodes(ray: Any, kind: str, n: int, steps: int, actors: int, collector_kind: str) -> dict:
    """``n`` episodes at once on ``actors`` actors (``n / actors`` each) that have already played one
    episode each (started, imported, warm): throughput, step latency, the actors' peak RSS."""
    from ares.rollout.ray import RayRunner

    scale = _scale()
    make_env, policy = scale.env_and_policy(kind, steps)
    scratch = Path(tempfile.mkdtemp(prefix="ares-ray-"))
    collector = scale.make_collector(collector_kind, scratch)
    async with RayRunner(make_env, actors=actors) as runner:
        await runner.run(policy, episodes=actors, concurrency=1)  # warm-up
        base = {s["name"]: s["rss_kib"] for s in await runner.stats()}
        t0 = time.perf_counter()
        results = await runner.run(policy, episodes=n, concurrency=-(-n // actors), collector=collector)
        wall = time.perf_counter() - t0
        peak = {s["name"]: s["hwm_kib"] for s in await runner.stats()}
    if collector is not None:
        collector.close()
    latencies = [x for r in results for x in r.step_latencies_s]
    grown = sum(peak[name] - base.get(name, peak[name]) for name in peak)
    return {
        "env": kind,
        "episodes": n,
        "actors": actors,
        "statuses": RunSummary.of(results, wall).statuses,
        "wall_s": round(wall, 2),
        "episodes_per_s": round(n / wall, 2),
        "steps_per_s": round(sum(r.steps for r in results) / wall, 1),
        "peak_rss_kib_per_env": round(grown / n, 1),
        "step_latency": summarize_ms(latencies) if latencies else None,
    }


async def ray_soak(args: argparse.Namespace) -> dict[str, Any]:
    """``--soak-episodes`` through the actors; each actor's figures every ``--soak-every`` results."""
    from ares.rollout.ray import RayRunner

    scale = _scale()
    make_env, policy = scale.env_and_policy(args.soak_env, 3)
    scratch = Path(tempfile.mkdtemp(prefix="ares-ray-soak-"))
    collector = scale.make_collector("jsonl", scratch)
    samples: dict[str, list[dict[str, Any]]] = {}
    pending: set[asyncio.Task[None]] = set()
    done = 0

    async with RayRunner(make_env, actors=args.actors) as runner:

        async def sample(at: int) -> None:
            for s in await runner.stats():
                samples.setdefault(s["name"], []).append({"episodes": at, **s})

        def on_result(_: Any) -> None:
            nonlocal done
            done += 1
            if done >= args.soak_warmup and (done - args.soak_warmup) % args.soak_every == 0:
                task = asyncio.get_running_loop().create_task(sample(done))
                pending.add(task)
                task.add_done_callback(pending.discard)

        t0 = time.perf_counter()
        results = await runner.run(
            policy, episodes=args.soak_episodes, concurrency=8, collector=collector, on_result=on_result,
            keep_records=False,
        )  # fmt: skip
        wall = time.perf_counter() - t0
        await asyncio.gather(*pending)
    collector.close()
    per_actor = {}
    for name, rows in samples.items():
        # each actor plays about 1/actors of the episodes: growth per episode *it* played
        own = [{**r, "episodes": r["episodes"] / args.actors} for r in rows]
        per_actor[name] = {
            "samples": len(rows),
            "rss_kib": [rows[0]["rss_kib"], rows[-1]["rss_kib"]],
            "rss_bytes_per_episode": _slope(own, "rss_kib", 1024.0),
            "fds": [rows[0]["fds"], rows[-1]["fds"]],
            "threads": [rows[0]["threads"], rows[-1]["threads"]],
        }
    return {
        "episodes": args.soak_episodes,
        "env": args.soak_env,
        "wall_s": round(wall, 1),
        "episodes_per_s": round(args.soak_episodes / wall, 2),
        "statuses": RunSummary.of(results, wall).statuses,
        "actors": per_actor,
    }


def _slope(rows: list[dict[str, Any]], key: str, scale: float) -> float | None:
    slope = _probe.growth_per_unit(rows, "episodes", key, scale)
    return None if slope is None else round(slope, 3)


def ray_scenario(args: argparse.Namespace) -> dict[str, Any]:
    ray = _start_ray(args.actors)
    scale = _scale()
    phases: dict[str, Any] = {}
    try:
        for kind, n in (("memory", args.envs), ("sandbox", args.sandbox_envs)):
            if not n:
                continue
            local = asyncio.run(scale.concurrent_episodes(kind, n, args.steps, args.collector))
            remote = asyncio.run(ray_episodes(ray, kind, n, args.steps, args.actors, args.collector))
            phases[kind] = {
                "local": local,
                "ray": remote,
                "ray_throughput_vs_local": round(remote["episodes_per_s"] / local["episodes_per_s"], 3),
            }
        if args.soak_episodes:
            phases["soak"] = asyncio.run(ray_soak(args))
    finally:
        ray.shutdown()
    return phases


def ray_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--envs", type=int, default=1000, help="in-process episodes at once (0: skip)")
    p.add_argument("--sandbox-envs", type=int, default=200, help="local-sandbox episodes at once (0: skip)")
    p.add_argument("--steps", type=int, default=10, help="agent turns per episode (memory env)")
    p.add_argument("--actors", type=int, default=2, help="Ray actors (and the Ray instance's CPUs)")
    p.add_argument("--collector", choices=("jsonl", "jsondir", "none"), default="jsonl")
    p.add_argument("--soak-episodes", type=int, default=0, help="episodes of the actor soak (0: skip)")
    p.add_argument("--soak-env", choices=("sandbox", "memory"), default="memory")
    p.add_argument("--soak-warmup", type=int, default=1000)
    p.add_argument("--soak-every", type=int, default=500)


# ----------------------------------------------------------------------------- tracing


async def _traced_run(kind: str, n: int, concurrency: int, steps: int) -> dict[str, Any]:
    make_env, policy = _scale().env_and_policy(kind, steps)
    await run_episodes(make_env, policy, episodes=min(n, 8), concurrency=concurrency)  # warm-up
    t0 = time.perf_counter()
    results = await run_episodes(make_env, policy, episodes=n, concurrency=concurrency)
    wall = time.perf_counter() - t0
    latencies = [x for r in results for x in r.step_latencies_s]
    return {"episodes_per_s": round(n / wall, 2), "step_latency": summarize_ms(latencies)}


def tracing_scenario(args: argparse.Namespace) -> dict[str, Any]:
    """Each level's episodes/s and step p50 (median of ``--rounds``, levels interleaved so that drift
    hits them alike). On a revision from before span tracing (``--baseline``) only "off" runs: there
    it means code without a single span call, the figure "off" must match."""
    try:
        from ares import tracing
    except ImportError:
        tracing = None
    levels = ["off"] if tracing is None else ["off", *(x for x in args.levels.split(",") if x != "off")]
    runs: dict[str, list[dict[str, Any]]] = {level: [] for level in levels}
    for _ in range(args.rounds):
        for level in levels:
            if tracing is not None:
                tracing.configure(level, process="bench")  # type: ignore[arg-type]
            figures = asyncio.run(_traced_run(args.env, args.episodes, args.concurrency, 10))
            figures["events"] = len(tracing.drain()) if tracing is not None else 0
            runs[level].append(figures)
    if tracing is not None:
        tracing.shutdown()
    out: dict[str, Any] = {"env": args.env, "episodes": args.episodes, "rounds": args.rounds}
    for level, rows in runs.items():
        rates = [r["episodes_per_s"] for r in rows]
        out[level] = {
            "episodes_per_s_median": round(statistics.median(rates), 2),
            "episodes_per_s": rates,
            "step_p50_ms_median": round(statistics.median(r["step_latency"]["p50_ms"] for r in rows), 4),
            "events_per_episode": round(rows[-1]["events"] / args.episodes, 1),
        }
    for level in levels[1:]:
        out[level]["throughput_vs_off"] = round(
            out[level]["episodes_per_s_median"] / out["off"]["episodes_per_s_median"], 3
        )
    return out


def tracing_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--env", choices=("memory", "sandbox"), default="memory")
    p.add_argument("--episodes", type=int, default=1000)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--levels", default="off,basic,full", help="levels besides off, comma-separated")
