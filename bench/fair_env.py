"""One figure of the fair comparison, in this process: the same workload through either framework.

Run by ``env_throughput.py --fair`` (one fresh interpreter per figure, frameworks alternating); it
imports nothing of the project at module level, so upstream's interpreter can run it:

    /tmp/upstream/bin/python bench/fair_env.py --fw upstream --envs 1 --turns 5
    .venv/bin/python         bench/fair_env.py --fw project  --envs 100 --turns 50

The workload is identical on both sides (as /work/shared/scripts/fair_bench.py defines it):
  * agent: ``turns`` times { await llm(REQUEST); await sandbox.exec("true") }, then it returns, so an
    episode is ``turns`` steps and its last step runs the framework's own verifier and reward path;
  * sandbox: an in-memory double, every call returns at once; it gives each framework's verifier
    exactly what that verifier asks of a backend and no more. Upstream runs test.sh in the agent's
    container and cats reward.txt there (its double answers the cat with "1.0"). The project refuses
    to run tests where the agent ran unless asked (trust model), so its double declares
    ``outputs-fork`` and ``archive`` as the docker and cloud backends do: ``fork_outputs`` gives a
    fresh started double, the tests are uploaded there and run, and the host reads the reward from
    the fork's archive of /logs/verifier (a prebuilt tar holding reward.txt = "1.0");
  * policy: one prebuilt response passed straight to step(); one prebuilt request; default GC.

``--envs 1``: whole episodes back to back on one env, resets timed. ``--envs K``: K envs, one asyncio
task each, ``--steps`` steps per env, the first reset untimed. Memory: RSS and (``--tracemalloc``)
Python allocations per env, after the first reset (idle) and at the end (after the episodes).
Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import io
import json
import os
import pathlib
import sys
import tarfile
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from typing import Any


def upstream_side(root: pathlib.Path, turns: int) -> tuple[Callable[[], Any], Any, Callable[[Any], bool]]:
    """Upstream ARES 0.1.0's CodeEnvironment over a double container; its import would fetch the
    Harbor registry over the network, so the registry client is stubbed for the import."""
    from harbor.registry.client import factory as harbor_factory
    from harbor.registry.client import json as harbor_json_client

    registry = root / "empty_registry.json"
    registry.write_text("[]")
    original = harbor_factory.RegistryClientFactory.__dict__["create"]
    harbor_factory.RegistryClientFactory.create = staticmethod(
        lambda info=None: harbor_json_client.JsonRegistryClient(path=registry)
    )
    try:
        from ares.environments import code_env  # type: ignore[import-not-found]
    finally:
        harbor_factory.RegistryClientFactory.create = original
    from ares.code_agents import code_agent_base  # type: ignore[import-not-found]
    from ares.containers import containers  # type: ignore[import-not-found]
    from ares.llms import request as ares_request  # type: ignore[import-not-found]
    from ares.llms import response as ares_response  # type: ignore[import-not-found]
    from harbor.models.task import task as harbor_task
    from harbor.models.trial import paths as harbor_paths

    reward_cmd = f"cat {harbor_paths.EnvironmentPaths.reward_text_path}"
    reward = containers.ExecResult(output="1.0\n", exit_code=0)
    ok = containers.ExecResult(output="", exit_code=0)

    class MemoryContainer(containers.Container):  # type: ignore[misc]
        async def start(self, env: Any = None) -> None:
            return None

        async def stop(self) -> None:
            return None

        async def exec_run(
            self, command: str, *, workdir: Any = None, env: Any = None, timeout_s: Any = None
        ) -> Any:
            return reward if command == reward_cmd else ok

        async def upload_files(self, local_paths: Any, remote_paths: Any) -> None:
            return None

        async def download_files(self, remote_paths: Any, local_paths: Any) -> None:
            return None

        def stop_and_remove(self) -> None:
            return None

    class Factory:
        @classmethod
        def from_image(cls, **kwargs: Any) -> MemoryContainer:
            return MemoryContainer()

        @classmethod
        def from_dockerfile(cls, **kwargs: Any) -> MemoryContainer:
            return MemoryContainer()

    request = ares_request.LLMRequest(messages=[{"role": "user", "content": "what next?"}])
    action = ares_response.LLMResponse(
        data=[ares_response.TextData(content="echo hi")],
        cost=0.0,
        usage=ares_response.Usage(prompt_tokens=0, generated_tokens=0),
    )

    class Agent(code_agent_base.CodeAgent):  # type: ignore[misc]
        def __init__(self, *, container: Any, llm_client: Any) -> None:
            self._c, self._llm = container, llm_client

        async def run(self, task: Any) -> None:
            llm, container = self._llm, self._c
            for _ in range(turns):
                await llm(request)
                await container.exec_run("true")

    task_dir = root / "tasks" / "t0"
    (task_dir / "environment").mkdir(parents=True)
    (task_dir / "tests").mkdir()
    (task_dir / "task.toml").write_text(
        'version = "1.0"\n\n[verifier]\ntimeout_sec = 60.0\n\n[agent]\ntimeout_sec = 60.0\n\n'
        "[environment]\ncpus = 1\nmemory_mb = 2048\nstorage_mb = 10240\n"
    )
    (task_dir / "instruction.md").write_text("nothing\n")
    (task_dir / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\n")
    (task_dir / "tests" / "test.sh").write_text("exit 0\n")
    tasks = [harbor_task.Task(task_dir=task_dir)]

    def make_env() -> Any:
        return code_env.CodeEnvironment(
            tasks, container_factory=Factory, code_agent_factory=Agent, step_limit=max(250, turns + 1)
        )

    return make_env, action, lambda ts: ts.step_type == "LAST"


def project_side(turns: int) -> tuple[Callable[[], Any], Any, Callable[[Any], bool]]:
    """This project's CodeEnvironment over a double that declares the verifier fork it needs."""
    from collections.abc import Mapping, Sequence
    from dataclasses import dataclass

    from ares.envs.code_env import CodeEnvironment
    from ares.errors import SandboxError
    from ares.llm.types import LLMRequest, LLMResponse, user
    from ares.sandbox.base import DiffSummary, ExecResult, FileMap, SandboxSpec
    from ares.sandbox.capabilities import Capability
    from ares.sandbox.lifecycle import StartStopContext
    from ares.tasks.model import Task

    request = LLMRequest(messages=(user("what next?"),))
    action = LLMResponse(content="echo hi")
    ok = ExecResult("", "", 0, False, 0.0)
    logs = io.BytesIO()  # what docker's archive API returns for /logs/verifier after the tests
    with tarfile.open(fileobj=logs, mode="w") as tar:
        tar.addfile(tarfile.TarInfo("verifier"), None)
        tar.getmember("verifier").type = tarfile.DIRTYPE
        reward = tarfile.TarInfo("verifier/reward.txt")
        reward.size = 4
        tar.addfile(reward, io.BytesIO(b"1.0\n"))
    logs_tar = logs.getvalue()

    @dataclass(frozen=True, slots=True)
    class Fork:
        sandbox: MemorySandbox
        outside: DiffSummary | None = None

        def shell_argv(self, *args: str) -> list[str] | None:
            return None

    class MemorySandbox(StartStopContext):
        """Answers at once; the tests it "runs" leave reward.txt = 1.0 in /logs/verifier."""

        __slots__ = ("spec",)
        # A baseline revision without ``archive`` reads the logs through ``download`` instead.
        capabilities = frozenset({Capability.OUTPUTS_FORK, *(c for c in Capability if c.value == "archive")})

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
            return ok

        async def upload(self, src: pathlib.Path | FileMap, dest: str) -> None:
            return None

        async def download(self, src: str, dest: pathlib.Path) -> None:
            if src.rstrip("/") == "/logs/verifier":
                dest.mkdir(parents=True, exist_ok=True)
                (dest / "reward.txt").write_text("1.0\n")

        async def read_file(self, path: str) -> bytes:
            return b""

        async def archive(self, path: str) -> bytes:
            if path.rstrip("/") != "/logs/verifier":
                raise SandboxError(f"cannot archive {path}: no such file or directory")
            return logs_tar

        async def fork_outputs(self, outputs: Sequence[str] | None, *, fresh: Sequence[str] = ()) -> Fork:
            fork = MemorySandbox(self.spec)
            await fork.start()
            return Fork(fork)

    class Agent:
        __slots__ = ("_llm", "_sandbox")

        def __init__(self, llm: Any, sandbox: Any) -> None:
            self._llm, self._sandbox = llm, sandbox

        async def run(self) -> None:
            llm, sandbox = self._llm, self._sandbox
            for _ in range(turns):
                await llm(request)
                await sandbox.exec("true")

    class Format:
        def command(self, command: str) -> LLMResponse:
            return action

        def submit(self) -> LLMResponse:
            return action

    class AgentFactory:
        action_format = Format()

        def __call__(self, *, sandbox: Any, llm: Any, task: Task) -> Agent:
            return Agent(llm, sandbox)

    tasks = [Task(id="t0", instruction="nothing", tests={"test.sh": "exit 0"})]

    def make_env() -> CodeEnvironment:
        return CodeEnvironment(
            tasks, agent_factory=AgentFactory(), sandbox_factory=MemorySandbox, step_limit=max(250, turns + 1)
        )

    return make_env, action, lambda ts: ts.last()


def rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def traced_bytes() -> int:
    return tracemalloc.get_traced_memory()[0] if tracemalloc.is_tracing() else 0


async def single(
    make_env: Callable[[], Any], action: Any, is_last: Callable[[Any], bool], n: int
) -> dict[str, Any]:
    """One env, whole episodes back to back (resets timed), each ending with reward 1.0."""
    perf = time.perf_counter
    env = make_env()
    async with env:
        ts = await env.reset()  # warm-up episode
        while not is_last(ts):
            ts = await env.step(action)
        steps = episodes = 0
        t0 = perf()
        while steps < n:
            ts = await env.reset()
            while True:
                ts = await env.step(action)
                steps += 1
                if is_last(ts):
                    assert ts.reward == 1.0, ts
                    episodes += 1
                    break
        wall = perf() - t0
    return {"envs": 1, "steps": steps, "episodes": episodes, "wall_s": wall}


async def many(
    make_env: Callable[[], Any], action: Any, is_last: Callable[[Any], bool], k: int, n: int
) -> dict[str, Any]:
    """K envs, each stepped ``n`` times by its own task; a LAST is followed by a (timed) reset."""
    gc.collect()
    rss0, mem0 = rss_kib(), traced_bytes()
    envs = [make_env() for _ in range(k)]
    for env in envs:
        await env.__aenter__()
    await asyncio.gather(*(env.reset() for env in envs))
    gc.collect()
    rss1, mem1 = rss_kib(), traced_bytes()
    if tracemalloc.is_tracing():
        tracemalloc.reset_peak()
    episodes = 0

    async def worker(env: Any) -> None:
        nonlocal episodes
        for _ in range(n):
            ts = await env.step(action)
            if is_last(ts):
                assert ts.reward == 1.0, ts
                episodes += 1
                await env.reset()

    tasks = [asyncio.ensure_future(worker(env)) for env in envs]
    t0 = time.perf_counter()
    await asyncio.gather(*tasks)
    wall = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1] if tracemalloc.is_tracing() else 0
    gc.collect()
    rss2, mem2 = rss_kib(), traced_bytes()
    for env in envs:
        await env.__aexit__(None, None, None)
    out: dict[str, Any] = {
        "envs": k, "steps": k * n, "episodes": episodes, "wall_s": wall,
        "rss_kib_per_env_idle": round((rss1 - rss0) / k, 2),
        "rss_kib_per_env_end": round((rss2 - rss0) / k, 2),
    }  # fmt: skip
    if tracemalloc.is_tracing():
        out["py_kib_per_env_idle"] = round((mem1 - mem0) / k / 1024, 2)
        out["py_kib_per_env_end"] = round((mem2 - mem0) / k / 1024, 2)
        out["py_kib_per_env_peak"] = round((peak - mem0) / k / 1024, 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fw", choices=("upstream", "project"), required=True)
    parser.add_argument("--envs", type=int, default=1)
    parser.add_argument("--turns", type=int, default=50, help="steps per episode")
    parser.add_argument("--steps", type=int, default=2000, help="steps in all (1 env) or per env (K envs)")
    parser.add_argument("--tracemalloc", action="store_true", help="count Python allocations per env")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ares-fair-") as tmp:
        if args.fw == "upstream":
            make_env, action, is_last = upstream_side(pathlib.Path(tmp), args.turns)
        else:
            make_env, action, is_last = project_side(args.turns)
        if args.tracemalloc:
            tracemalloc.start()
        if args.envs == 1 and not args.tracemalloc:
            out = asyncio.run(single(make_env, action, is_last, args.steps))
        else:
            out = asyncio.run(many(make_env, action, is_last, args.envs, args.steps))
    out.update(
        fw=args.fw, turns=args.turns, steps_per_s=round(out["steps"] / out["wall_s"]),
        us_per_step=round(1e6 * out["wall_s"] / out["steps"], 3), python=sys.version.split()[0],
        loadavg=[round(x, 2) for x in os.getloadavg()],
    )  # fmt: skip
    print(json.dumps(out))


if __name__ == "__main__":
    main()
