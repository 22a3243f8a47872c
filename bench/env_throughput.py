"""Environment-layer throughput: what CodeEnvironment itself costs per step, with no real work.

The sandbox is an in-memory double (no processes), the agent only calls its LLM K times with one
prebuilt request, and the policy replays one prebuilt response, so every microsecond measured is
the framework's: step(), the interceptor hand-off, TimeStep building and episode bookkeeping.

Phases (each in a fresh subprocess, so heap and gc state of one cannot skew the next):
  single      one environment, long episodes (step_limit=None)
  concurrent  N environments, each stepped by its own asyncio task
  concurrent_frozen  the same with gc.freeze() once every environment has been reset
  memory      N idle environments (reset done, waiting for a step): tracemalloc and RSS per env

Targets: >= 50,000 steps/s for one env, >= 30,000 aggregate at 1,000 envs, <= 10 KiB per idle env.

    .venv/bin/python bench/env_throughput.py [--single-steps 100000] [--episode-steps 10000]
        [--envs 1000] [--concurrent-steps 200] [--concurrent-episodes 2] [--repeat 3]

``--fair``: the side-by-side comparison with upstream ARES 0.1.0 instead (``fair_env.py``: the same
agent, sandbox double and reward path through both frameworks' public reset/step): 5/50/500-step
episodes on one env, 5/50-step episodes on 100 and 1,000 envs, Python memory per env at 100 and
1,000 envs; each figure in a fresh process, the frameworks alternating, ``--rounds`` rounds. One
JSON line per figure, then one with the ratios (project / upstream, medians of the rounds):

    .venv/bin/python bench/env_throughput.py --fair [--upstream-python /tmp/upstream/bin/python]
        [--rounds 2] [--fair-steps 40000] [--baseline-src DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import time
import tracemalloc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from _common import machine_info
from ares.core.status import EpisodeStatus
from ares.envs.code_env import CodeEnvironment
from ares.llm.interceptor import LLMClient
from ares.llm.types import LLMRequest, LLMResponse, user
from ares.policies.scripted import ReplayPolicy
from ares.sandbox.base import DiffSummary, ExecResult, FileMap, SandboxSpec
from ares.sandbox.capabilities import Capability
from ares.sandbox.lifecycle import StartStopContext
from ares.tasks.model import Task

REQUEST = LLMRequest(messages=(user("what next?"),), system_prompt="you are a benchmark")
RESPONSE = LLMResponse(content="echo hi")
_OK = ExecResult("", "", 0, False, 0.0)
_MISSING = ExecResult("", "cat: no such file", 1, False, 0.0)
_REWARD = ExecResult("1.0\n", "", 0, False, 0.0)


def _logs_archive() -> bytes:
    """What docker's archive API returns for /logs/verifier once the tests wrote reward.txt = 1.0."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        top = tarfile.TarInfo("verifier")
        top.type = tarfile.DIRTYPE
        tar.addfile(top)
        reward = tarfile.TarInfo("verifier/reward.txt")
        reward.size = 4
        tar.addfile(reward, io.BytesIO(b"1.0\n"))
    return out.getvalue()


LOGS_ARCHIVE = _logs_archive()


@dataclass(frozen=True, slots=True)
class _Fork:
    sandbox: MemorySandbox
    outside: DiffSummary | None = None

    def shell_argv(self, *args: str) -> list[str] | None:
        return None


class MemorySandbox(StartStopContext):
    """A Sandbox double that answers at once and says the verifier wrote reward.txt = 1.0. It
    declares what the verifier needs of a backend without host binds (as docker and cloud): a fresh
    fork for the tests and an archive of /logs/verifier."""

    capabilities = frozenset({Capability.OUTPUTS_FORK, Capability.ARCHIVE})

    def __init__(self, spec: SandboxSpec) -> None:
        self.spec = spec

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def exec(
        self,
        cmd: str,
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        if cmd.startswith("cat "):
            return _REWARD if cmd.endswith("/reward.txt") else _MISSING
        return _OK

    async def upload(self, src: Path | FileMap, dest: str) -> None:
        return None

    async def download(self, src: str, dest: Path) -> None:
        # The verifier downloads /logs/verifier and reads the reward itself.
        dest.mkdir(parents=True, exist_ok=True)
        (dest / "reward.txt").write_text("1.0\n")

    async def read_file(self, path: str) -> bytes:
        return b"1.0\n"

    async def archive(self, path: str) -> bytes:
        return LOGS_ARCHIVE

    async def fork_outputs(self, outputs: Sequence[str] | None, *, fresh: Sequence[str] = ()) -> _Fork:
        return _Fork(MemorySandbox(self.spec))

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None


class LoopAgent:
    """Asks its LLM ``calls`` times with one prebuilt request, then finishes."""

    __slots__ = ("_calls", "_llm")

    def __init__(self, llm: LLMClient, calls: int) -> None:
        self._llm, self._calls = llm, calls

    async def run(self) -> None:
        llm = self._llm
        for _ in range(self._calls):
            await llm(REQUEST)


class _Format:
    def command(self, command: str) -> LLMResponse:
        return RESPONSE

    def submit(self) -> LLMResponse:
        return RESPONSE


class LoopAgentFactory:
    action_format = _Format()

    def __init__(self, calls: int) -> None:
        self.calls = calls

    def __call__(self, *, sandbox: Any, llm: LLMClient, task: Task) -> LoopAgent:
        return LoopAgent(llm, self.calls)


TASK = Task(id="bench", instruction="nothing", tests={"test.sh": "exit 0"})


def make_env(episode_steps: int) -> CodeEnvironment:
    return CodeEnvironment(
        [TASK], agent_factory=LoopAgentFactory(episode_steps), sandbox_factory=MemorySandbox, step_limit=None
    )


class GcWatch:
    """Counts collections per generation and the time spent in them while active."""

    def __init__(self) -> None:
        self.pause_s = 0.0
        self.max_pause_s = 0.0
        self._t0 = 0.0
        self._before: list[dict[str, int]] = []

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            pause = time.perf_counter() - self._t0
            self.pause_s += pause
            self.max_pause_s = max(self.max_pause_s, pause)

    def __enter__(self) -> Self:
        self._before = gc.get_stats()
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)
        self.after = gc.get_stats()
        self.frozen = gc.get_freeze_count()

    def report(self) -> dict[str, Any]:
        pairs = list(zip(self.after, self._before, strict=True))
        return {
            "collections_per_gen": [a["collections"] - b["collections"] for a, b in pairs],
            "collected_per_gen": [a["collected"] - b["collected"] for a, b in pairs],
            "pause_total_ms": round(self.pause_s * 1e3, 2),
            "pause_max_ms": round(self.max_pause_s * 1e3, 3),
            "frozen_objects": self.frozen,
        }


async def play(env: CodeEnvironment, policy: ReplayPolicy) -> int:
    """One episode from reset to LAST; returns its step count (it must finish with reward 1.0)."""
    ts = await env.reset()
    while not ts.last():
        ts = await env.step(await policy.act(ts.observation))  # type: ignore[arg-type]
    episode = env.episode
    assert episode is not None and episode.status is EpisodeStatus.FINISHED and ts.reward == 1.0, episode
    return episode.steps


async def phase_single(total_steps: int, episode_steps: int) -> dict[str, Any]:
    env = make_env(episode_steps)
    policy = ReplayPolicy([], RESPONSE)
    await play(make_env(1000), policy)  # warm-up
    steps = 0
    with GcWatch() as watch:
        t0 = time.perf_counter()
        while steps < total_steps:
            steps += await play(env, policy)
        elapsed = time.perf_counter() - t0
    await env.close()
    return {
        "steps": steps,
        "episode_steps": episode_steps,
        "seconds": round(elapsed, 4),
        "steps_per_s": round(steps / elapsed),
        "us_per_step": round(elapsed / steps * 1e6, 3),
        "gc": watch.report(),
    }


async def phase_concurrent(n_envs: int, episode_steps: int, episodes: int, freeze: bool) -> dict[str, Any]:
    """Every env is reset before the clock starts; later resets (episodes > 1) are timed."""
    envs = [make_env(episode_steps) for _ in range(n_envs)]
    go = asyncio.Event()
    first: list[Any] = [None] * n_envs
    ready = 0
    all_ready = asyncio.Event()

    async def worker(i: int) -> int:
        nonlocal ready
        env, policy = envs[i], ReplayPolicy([], RESPONSE)
        first[i] = await env.reset()
        ready += 1
        if ready == n_envs:
            all_ready.set()
        await go.wait()
        ts, steps = first[i], 0
        for episode in range(episodes):
            if episode:
                ts = await env.reset()
            while not ts.last():
                ts = await env.step(await policy.act(ts.observation))
            assert env.episode is not None and env.episode.status is EpisodeStatus.FINISHED
            steps += env.episode.steps
        return steps

    tasks = [asyncio.create_task(worker(i)) for i in range(n_envs)]
    await all_ready.wait()
    gc.collect()
    if freeze:
        gc.freeze()
    with GcWatch() as watch:
        t0 = time.perf_counter()
        go.set()
        counts = await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - t0
    steps = sum(counts)
    if freeze:
        gc.unfreeze()
    for env in envs:
        await env.close()
    return {
        "envs": n_envs,
        "episode_steps": episode_steps,
        "episodes_per_env": episodes,
        "steps": steps,
        "gc_freeze_after_reset": freeze,
        "seconds": round(elapsed, 4),
        "steps_per_s": round(steps / elapsed),
        "us_per_step": round(elapsed / steps * 1e6, 3),
        "gc": watch.report(),
    }


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


async def phase_memory(n_envs: int) -> dict[str, Any]:
    """Idle = reset() returned FIRST and the agent waits on its first response."""
    policy = ReplayPolicy([], RESPONSE)
    await play(make_env(10), policy)  # warm-up: imports, code objects, interned strings
    gc.collect()
    rss0 = _rss_kib()
    envs = [make_env(10) for _ in range(n_envs)]
    for env in envs:
        await env.reset()
    gc.collect()
    rss_delta = _rss_kib() - rss0
    for env in envs:
        await env.close()
    del envs
    gc.collect()

    # tracemalloc counts Python allocations exactly; split construction from reset.
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    envs = [make_env(10) for _ in range(n_envs)]
    built = tracemalloc.get_traced_memory()[0]
    for env in envs:
        await env.reset()
    gc.collect()
    idle = tracemalloc.get_traced_memory()[0]
    snapshot = tracemalloc.take_snapshot()
    tracemalloc.stop()
    top = [
        {"where": str(s.traceback[0]), "kib_per_env": round(s.size / n_envs / 1024, 3)}
        for s in snapshot.statistics("lineno")[:12]
    ]
    for env in envs:
        await env.close()
    return {
        "envs": n_envs,
        "tracemalloc_kib_per_env_constructed": round((built - base) / n_envs / 1024, 3),
        "tracemalloc_kib_per_env_idle": round((idle - base) / n_envs / 1024, 3),
        "rss_kib_per_env_idle": round(rss_delta / n_envs, 3),
        "top_allocation_sites": top,
    }


def run_phase(args: argparse.Namespace) -> dict[str, Any]:
    if args.phase == "single":
        return asyncio.run(phase_single(args.single_steps, args.episode_steps))
    if args.phase in ("concurrent", "concurrent_frozen"):
        freeze = args.phase == "concurrent_frozen"
        return asyncio.run(
            phase_concurrent(args.envs, args.concurrent_steps, args.concurrent_episodes, freeze)
        )
    if args.phase == "memory":
        return asyncio.run(phase_memory(args.envs))
    raise SystemExit(f"unknown phase {args.phase!r}")


PHASES = ("single", "concurrent", "concurrent_frozen", "memory")
FAIR = Path(__file__).with_name("fair_env.py")
#: (envs, steps per episode) of the fair comparison's throughput figures.
FAIR_FIGURES = ((1, 5), (1, 50), (1, 500), (100, 5), (100, 50), (1000, 5), (1000, 50))
FAIR_MEMORY_ENVS = (100, 1000)


def fair_figure(python: str, fw: str, argv: list[str], src: str | None = None) -> dict[str, Any]:
    """One figure from a fresh ``python`` running fair_env.py (the project from ``src`` when given);
    printed as it comes."""
    env = {**os.environ, "PYTHONPATH": src} if src else None
    fw_arg = "project" if fw == "baseline" else fw
    proc = subprocess.run(
        [python, str(FAIR), f"--fw={fw_arg}", *argv], check=True, capture_output=True, text=True, env=env
    )
    figure = json.loads(proc.stdout)
    figure["fw"] = fw
    print(json.dumps(figure), flush=True)
    return figure


def run_fair(args: argparse.Namespace) -> None:
    """Both frameworks, figure by figure, alternating fresh processes over ``args.rounds`` rounds."""
    pythons = {"upstream": args.upstream_python, "project": sys.executable, "baseline": sys.executable}
    srcs = {"baseline": args.baseline_src}
    sides = ("upstream", "baseline", "project") if args.baseline_src else ("upstream", "project")
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for _ in range(args.rounds):
        for envs, turns in FAIR_FIGURES:
            steps = args.fair_steps if envs == 1 else max(2 * turns, args.fair_steps // envs)
            for fw in sides:
                argv = [f"--envs={envs}", f"--turns={turns}", f"--steps={steps}"]
                runs.setdefault((f"{envs} env(s), {turns}-step episodes", fw), []).append(
                    fair_figure(pythons[fw], fw, argv, srcs.get(fw))
                )
        for envs in FAIR_MEMORY_ENVS:
            for fw in sides:
                argv = [f"--envs={envs}", "--turns=5", "--steps=20", "--tracemalloc"]
                runs.setdefault((f"{envs} envs, memory", fw), []).append(
                    fair_figure(pythons[fw], fw, argv, srcs.get(fw))
                )
    summary: dict[str, Any] = {}
    for (name, fw), figures in runs.items():
        if name.endswith("memory"):
            keys = ("py_kib_per_env_idle", "py_kib_per_env_end", "rss_kib_per_env_end")
            summary.setdefault(name, {})[fw] = {k: statistics.median(f[k] for f in figures) for k in keys}
        else:
            summary.setdefault(name, {})[fw] = [f["steps_per_s"] for f in figures]
    for name, by_fw in summary.items():
        if not name.endswith("memory"):
            for fw in ("baseline", "project"):
                if fw in by_fw:
                    ratio = statistics.median(by_fw[fw]) / statistics.median(by_fw["upstream"])
                    by_fw[f"ratio_{fw}"] = round(ratio, 2)
    print(json.dumps({"bench": "env_throughput --fair", "machine": machine_info(), "figures": summary}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--single-steps", type=int, default=100_000)
    parser.add_argument("--episode-steps", type=int, default=10_000)
    parser.add_argument("--envs", type=int, default=1000)
    parser.add_argument("--concurrent-steps", type=int, default=200, help="episode length at N envs")
    parser.add_argument("--concurrent-episodes", type=int, default=2, help="episodes per env at N envs")
    parser.add_argument("--repeat", type=int, default=3, help="runs per throughput phase; best is kept")
    parser.add_argument("--phase", choices=PHASES, help="run one phase in this process (internal)")
    parser.add_argument("--fair", action="store_true", help="the side-by-side comparison with upstream")
    parser.add_argument("--upstream-python", default="/tmp/upstream/bin/python", help="its interpreter")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of the fair comparison")
    parser.add_argument("--fair-steps", type=int, default=40_000, help="steps per fair figure (all envs)")
    parser.add_argument(
        "--baseline-src", help="also the project from this src/ dir (`git archive main src`), as 'baseline'"
    )
    args = parser.parse_args()
    if args.fair:
        if not Path(args.upstream_python).exists():
            parser.error(f"no upstream interpreter at {args.upstream_python} (see --upstream-python)")
        run_fair(args)
        return
    if args.phase:
        print(json.dumps(run_phase(args)))
        return

    forwarded = [
        f"--single-steps={args.single_steps}", f"--episode-steps={args.episode_steps}",
        f"--envs={args.envs}", f"--concurrent-steps={args.concurrent_steps}",
        f"--concurrent-episodes={args.concurrent_episodes}",
    ]  # fmt: skip
    results: dict[str, Any] = {}
    for phase in PHASES:
        runs = []
        for _ in range(1 if phase == "memory" else args.repeat):
            proc = subprocess.run(
                [sys.executable, __file__, f"--phase={phase}", *forwarded],
                check=True, capture_output=True, text=True,
            )  # fmt: skip
            runs.append(json.loads(proc.stdout))
        if phase == "memory":
            results[phase] = runs[0]
        else:
            best = max(runs, key=lambda r: r["steps_per_s"])
            best["all_runs_steps_per_s"] = [r["steps_per_s"] for r in runs]
            results[phase] = best
    out = {
        "bench": "env_throughput",
        "machine": machine_info(),
        **results,
        "targets": {
            "single_env_ge_50k_steps_per_s": results["single"]["steps_per_s"] >= 50_000,
            "concurrent_1000_ge_30k_steps_per_s": results["concurrent"]["steps_per_s"] >= 30_000,
            "idle_env_le_10_kib": results["memory"]["tracemalloc_kib_per_env_idle"] <= 10.0,
        },
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
