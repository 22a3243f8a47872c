"""ARES at scale: long runs and many concurrent episodes in one process. One scenario per subcommand.

  soak   N short episodes (default 10,000) through ``run_episodes`` with records on; samples RSS,
         fds, threads, malloc and Python-heap figures every ``--every`` episodes after ``--warmup``
         and prints each one's growth per episode (least-squares slope). Target: < 1 KB/episode.
         ``--via cli`` runs the same through an ``ares run`` subprocess, sampled from outside.
  local  concurrent episodes through the local runner: ``--envs`` in-process environments at once
         (default 1,000) and ``--sandbox-envs`` local-sandbox ones (default 200): throughput, peak
         RSS per environment, step latency p50/p95.
  ray      the ``local`` episodes through the local runner and through Ray actors, side by side,
           and a soak inside the actors (bench/scale_ray.py).
  tracing  episodes/s and step latency with span tracing at each level (bench/scale_ray.py).

Environments: ``sandbox`` is HumanEval on the local sandbox with the oracle policy (real processes,
~20 episodes/s on 2 cores at concurrency 8); ``memory`` is a CodeEnvironment over an in-memory
sandbox whose agent keeps a growing conversation (new request and message objects every step, like
a real agent), so thousands of episodes take seconds and only ARES's own costs show.

A new scenario is a function ``(args) -> figures`` plus its options, registered in ``SCENARIOS``.
``--baseline REF`` runs a scenario on git revision REF's ``src/`` and on the working tree, each in a
fresh interpreter; ``--malloc-arena-max N`` runs it with glibc's MALLOC_ARENA_MAX=N.

    .venv/bin/python bench/scale.py soak [--episodes 10000] [--warmup 1000] [--every 250]
        [--env sandbox|memory] [--collector jsonl|jsondir|none] [--via runner|cli] [--tracemalloc]
    .venv/bin/python bench/scale.py local [--envs 1000] [--sandbox-envs 200] [--steps 10]
    .venv/bin/python bench/scale.py ray [--envs 1000] [--sandbox-envs 200] [--actors 2]
        [--soak-episodes 10000] [--soak-env memory|sandbox]
    .venv/bin/python bench/scale.py tracing [--env memory|sandbox] [--episodes 1000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import inspect
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _probe
import scale_ray
from _common import ROOT, compare_with, figures_in_subprocess, machine_info, summarize_ms
from ares.core.environment import Environment
from ares.envs.code_env import CodeEnvironment
from ares.llm.interceptor import LLMClient
from ares.llm.types import LLMRequest, LLMResponse, assistant, user
from ares.policies.scripted import ReplayPolicy
from ares.records import JsonDirCollector, JsonlCollector
from ares.rollout.results import EpisodeResult, RunSummary
from ares.rollout.runner import run_episodes
from ares.tasks.model import Task
from env_throughput import MemorySandbox

# ----------------------------------------------------------------------------- environments

ANSWER = LLMResponse(content="echo hi")
TASK = Task(id="scale", instruction="say hi", tests={"test.sh": "exit 0"})


class ChatAgent:
    """Asks its LLM ``turns`` times, each request the whole conversation so far plus one new turn."""

    def __init__(self, llm: LLMClient, turns: int) -> None:
        self._llm, self._turns = llm, turns

    async def run(self) -> None:
        messages = (user(f"{TASK.instruction} ({id(self)})"),)
        for turn in range(self._turns):
            response = await self._llm(LLMRequest(messages=messages, system_prompt="you are a benchmark"))
            messages = (*messages, assistant(response.content), user(f"output of turn {turn}: hi"))


class _Format:
    def command(self, command: str) -> LLMResponse:
        return ANSWER

    def submit(self) -> LLMResponse:
        return ANSWER


class ChatAgentFactory:
    action_format = _Format()

    def __init__(self, turns: int) -> None:
        self.turns = turns

    def __call__(self, *, sandbox: Any, llm: LLMClient, task: Task) -> ChatAgent:
        return ChatAgent(llm, self.turns)


def env_and_policy(kind: str, steps: int) -> tuple[Callable[[], Environment[Any, Any]], Any]:
    """A factory of fresh environments of ``kind`` and the policy factory that plays them."""
    if kind == "memory":
        agent = ChatAgentFactory(steps)

        def memory_env() -> Environment[Any, Any]:
            return CodeEnvironment(
                [TASK], agent_factory=agent, sandbox_factory=MemorySandbox, step_limit=None
            )

        return memory_env, lambda task, fmt: ReplayPolicy([], ANSWER)
    import ares
    from ares.policies import make_policy

    return lambda: ares.make("humaneval"), make_policy("oracle")


def make_collector(kind: str, scratch: Path) -> Any:
    if kind == "jsonl":
        return JsonlCollector(scratch / "trajectories.jsonl")
    if kind == "jsondir":
        return JsonDirCollector(scratch / "trajectories")
    return None


def compact_results() -> dict[str, Any]:
    """``keep_records=False`` where the runner has it (a baseline revision may not)."""
    return {"keep_records": False} if "keep_records" in inspect.signature(run_episodes).parameters else {}


# ----------------------------------------------------------------------------- soak

GROWTH = ("rss_kib", "fds", "threads", "malloc_in_use_kib", "malloc_free_kib", "malloc_mmapped_kib",
          "malloc_arenas", "py_traced_kib", "gc_objects")  # fmt: skip


def growth(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Per figure: first and last sample after warm-up and the fitted growth per episode
    (bytes for the KiB figures, count for the others)."""
    out: dict[str, Any] = {}
    for key in GROWTH:
        if not samples or key not in samples[0]:
            continue
        scale = 1024.0 if key.endswith("_kib") else 1.0
        slope = _probe.growth_per_unit(samples, "episodes", key, scale)
        name = key.removesuffix("_kib") + ("_bytes_per_episode" if scale > 1 else "_per_episode")
        out[key] = {"first": samples[0][key], "last": samples[-1][key], "max": max(s[key] for s in samples)}
        out[key][name] = None if slope is None else round(slope, 3)
    return out


async def soak_runner(args: argparse.Namespace, scratch: Path) -> dict[str, Any]:
    make_env, policy = env_and_policy(args.env, args.steps)
    collector = make_collector(args.collector, scratch)
    samples: list[dict[str, Any]] = []
    done = 0
    top_before: Any = None

    def on_result(result: EpisodeResult) -> None:
        nonlocal done, top_before
        done += 1
        if done < args.warmup or (done - args.warmup) % args.every:
            return
        if args.trim:
            _probe.malloc_trim()
        samples.append({"episodes": done, "t_s": round(time.perf_counter() - t0, 2), **_probe.sample()})
        if args.tracemalloc and top_before is None:
            top_before = tracemalloc.take_snapshot()

    if args.tracemalloc:
        tracemalloc.start(args.tracemalloc_frames)
    t0 = time.perf_counter()
    results = await run_episodes(
        make_env, policy, episodes=args.episodes, concurrency=args.concurrency, collector=collector,
        on_result=on_result, **compact_results(),
    )  # fmt: skip
    wall = time.perf_counter() - t0
    summary = RunSummary.of(results, wall)
    if collector is not None:
        collector.close()
    figures: dict[str, Any] = {
        "episodes_per_s": round(args.episodes / wall, 2),
        "wall_s": round(wall, 1),
        "statuses": summary.statuses,
        "pass_rate": summary.pass_rate,
        "growth_after_warmup": growth(samples),
        "samples": samples,
    }
    gc.collect()
    figures["end"] = {"results_held": len(results), **_probe.sample()}
    if args.tracemalloc and top_before is not None:
        diff = tracemalloc.take_snapshot().compare_to(top_before, "traceback")
        figures["tracemalloc_top_growth"] = [
            {"kib": round(d.size_diff / 1024, 1), "count": d.count_diff, "where": d.traceback.format()[-6:]}
            for d in diff[:12]
        ]
    return figures


def soak_cli(args: argparse.Namespace, scratch: Path) -> dict[str, Any]:
    """``ares run humaneval --policy oracle`` in a subprocess, sampled from outside by pid; the
    episode count is the number of result files it has written."""
    out = scratch / "run"
    argv = [sys.executable, "-m", "ares.cli.main", "run", "humaneval", "--policy", "oracle",
            "-n", str(args.episodes), "-c", str(args.concurrency), "--out", str(out)]  # fmt: skip
    samples: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    with subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) as proc:
        while proc.poll() is None:
            time.sleep(args.interval)
            episodes_dir = out / "episodes"
            done = len(os.listdir(episodes_dir)) if episodes_dir.is_dir() else 0
            if done >= args.warmup:
                try:
                    sample = _probe.sample(proc.pid)
                except FileNotFoundError:  # exited between poll() and the sample
                    break
                if "rss_kib" not in sample:  # a zombie: exited, not yet reaped
                    break
                samples.append({"episodes": done, **sample})
        stderr = proc.stderr.read().decode() if proc.stderr else ""
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"ares run exited {proc.returncode}:\n{stderr[-2000:]}")
    return {"episodes_per_s": round(args.episodes / wall, 2), "wall_s": round(wall, 1),
            "growth_after_warmup": growth(samples), "samples": samples}  # fmt: skip


def soak(args: argparse.Namespace) -> dict[str, Any]:
    scratch = Path(tempfile.mkdtemp(prefix="ares-soak-"))
    try:
        figures = soak_cli(args, scratch) if args.via == "cli" else asyncio.run(soak_runner(args, scratch))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    keys = ("episodes", "warmup", "every", "concurrency", "env", "steps", "collector", "via", "trim")
    return {"config": {k: getattr(args, k) for k in keys}, **figures}


def soak_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--episodes", type=int, default=10_000)
    p.add_argument("--warmup", type=int, default=1000, help="episodes before the first sample")
    p.add_argument("--every", type=int, default=250, help="episodes between samples")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--env", choices=("sandbox", "memory"), default="sandbox")
    p.add_argument("--steps", type=int, default=3, help="agent turns per episode (memory env)")
    p.add_argument("--collector", choices=("jsonl", "jsondir", "none"), default="jsondir")
    p.add_argument("--via", choices=("runner", "cli"), default="runner")
    p.add_argument("--interval", type=float, default=2.0, help="seconds between samples (--via cli)")
    p.add_argument("--trim", action="store_true", help="malloc_trim(0) before each sample")
    p.add_argument("--tracemalloc", action="store_true", help="trace Python allocations (slower)")
    p.add_argument("--tracemalloc-frames", type=int, default=8)


# ----------------------------------------------------------------------------- local


async def concurrent_episodes(
    kind: str, n: int, steps: int, collector_kind: str, *, python_memory: bool = False
) -> dict[str, Any]:
    """``n`` episodes at once through ``run_episodes``: throughput, step latency, and the peak RSS
    of this process over its level before, per environment (a sandbox's own processes are not in
    it; memory the warm-up freed is reused first, so this can read low). ``python_memory`` adds a
    second, untimed run under tracemalloc: the peak of Python allocations per environment."""
    make_env, policy = env_and_policy(kind, steps)
    scratch = Path(tempfile.mkdtemp(prefix="ares-local-"))
    collector = make_collector(collector_kind, scratch)
    try:
        # One episode first (imports, image layers), then the peak is measured from here.
        await run_episodes(make_env, policy, episodes=1, concurrency=1, collector=collector)
        gc.collect()
        base = _probe.status()["rss_kib"]
        _reset_peak_rss()
        t0 = time.perf_counter()
        results = await run_episodes(make_env, policy, episodes=n, concurrency=n, collector=collector)
        wall = time.perf_counter() - t0
        peak = _probe.status()["hwm_kib"]
        py_peak = None
        if python_memory:
            gc.collect()
            tracemalloc.start()
            await run_episodes(make_env, policy, episodes=n, concurrency=n, collector=collector)
            py_peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        if collector is not None:
            collector.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    latencies = [x for r in results for x in r.step_latencies_s]
    steps_done = sum(r.steps for r in results)
    figures = {
        "env": kind,
        "episodes": n,
        "concurrency": n,
        "collector": collector_kind,
        "statuses": RunSummary.of(results, wall).statuses,
        "wall_s": round(wall, 2),
        "episodes_per_s": round(n / wall, 2),
        "steps_per_s": round(steps_done / wall, 1),
        "peak_rss_kib_per_env": round((peak - base) / n, 1),
        "step_latency": summarize_ms(latencies) if latencies else None,
    }
    if py_peak is not None:
        figures["py_peak_kib_per_env"] = round(py_peak / 1024 / n, 1)
    return figures


def _reset_peak_rss() -> None:
    """Start VmHWM afresh (Linux: writing 5 to clear_refs), so the peak is this phase's."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def local(args: argparse.Namespace) -> dict[str, Any]:
    phases: dict[str, Any] = {}
    if args.envs:
        phases["memory"] = asyncio.run(
            concurrent_episodes("memory", args.envs, args.steps, args.collector, python_memory=True)
        )
    if args.sandbox_envs:
        phases["sandbox"] = asyncio.run(
            concurrent_episodes("sandbox", args.sandbox_envs, args.steps, args.collector, python_memory=True)
        )
    return phases


def local_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--envs", type=int, default=1000, help="in-process environments at once (0: skip)")
    p.add_argument("--sandbox-envs", type=int, default=200, help="local-sandbox environments at once")
    p.add_argument("--steps", type=int, default=10, help="agent turns per episode (memory env)")
    p.add_argument("--collector", choices=("jsonl", "jsondir", "none"), default="jsonl")


# ----------------------------------------------------------------------------- driver

Options = Callable[[argparse.ArgumentParser], None]
Run = Callable[[argparse.Namespace], Any]

#: name -> (add its options, run it and return its figures)
SCENARIOS: dict[str, tuple[Options, Run]] = {
    "soak": (soak_options, soak),
    "local": (local_options, local),
    "ray": (scale_ray.ray_options, scale_ray.ray_scenario),
    "tracing": (scale_ray.tracing_options, scale_ray.tracing_scenario),
}


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    top.add_argument("--figures-only", action="store_true", help="print the scenario's figures only")
    top.add_argument("--baseline", metavar="REF", help="also run on git revision REF's src/, side by side")
    top.add_argument("--malloc-arena-max", type=int, help="run with MALLOC_ARENA_MAX=N (a fresh process)")
    sub = top.add_subparsers(dest="scenario", required=True)
    for name, (options, _) in SCENARIOS.items():
        options(sub.add_parser(name))
    return top


def main() -> None:
    args = parser().parse_args()
    forwarded = [a for a in sys.argv[1:] if a not in ("--figures-only",)]
    if args.baseline:
        forwarded = _without(forwarded, "--baseline")
        figures: Any = compare_with(args.baseline, __file__, forwarded, rounds=1)
    elif args.malloc_arena_max and os.environ.get("MALLOC_ARENA_MAX") != str(args.malloc_arena_max):
        os.environ["MALLOC_ARENA_MAX"] = str(args.malloc_arena_max)
        figures = figures_in_subprocess(__file__, ROOT / "src", forwarded)
    else:
        figures = SCENARIOS[args.scenario][1](args)
    if args.figures_only:
        print(json.dumps(figures))
        return
    head = {"bench": f"scale.{args.scenario}", "machine": machine_info()}
    print(json.dumps({**head, "malloc_arena_max": os.environ.get("MALLOC_ARENA_MAX"), **figures}, indent=2))


def _without(argv: list[str], flag: str) -> list[str]:
    """``argv`` without ``flag`` and its value (given as ``flag V`` or ``flag=V``)."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == flag:
            skip = True
        elif not arg.startswith(f"{flag}="):
            out.append(arg)
    return out


if __name__ == "__main__":
    main()
