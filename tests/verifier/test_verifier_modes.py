"""The verifier's mode is decided by what the sandbox declares, recorded on every episode, and never a
silent fallback: a backend that cannot fork is an error that names it, unless in-place is asked for.

On Python 3.12+ a warm pool used to hide the local backend's forks (``isinstance`` against a
runtime-checkable protocol no longer sees ``__getattr__`` forwarding), and every pooled episode was
verified inside the agent's own sandbox; ``test_a_warm_pool_verifies_in_a_fork`` failed there.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

import ares
from ares.envs.episode import EpisodeStatus
from ares.errors import VerifierError
from ares.policies import make_policy
from ares.sandbox import ExecResult, SandboxSpec
from ares.tasks.model import Task
from ares.tasks.verifier import verify

TASK = Task(id="t", instruction="", tests={"test.sh": "echo 1 > /logs/verifier/reward.txt"})


class Forkless:
    """A sandbox double that can only run commands and move files (like a plain remote shell)."""

    def __init__(self, spec: SandboxSpec | None = None) -> None:
        self.spec = spec or SandboxSpec()
        self.commands: list[str] = []

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def exec(self, cmd: str, **_: Any) -> ExecResult:
        self.commands.append(cmd)
        return ExecResult("", "", 0, False, 0.0)

    async def upload(self, src: Any, dest: str) -> None:
        pass

    async def download(self, src: str, dest: Path) -> None:
        dest.mkdir(parents=True, exist_ok=True)
        (dest / "reward.txt").write_text("1\n")

    async def read_file(self, path: str) -> bytes:
        return b""


@pytest.mark.parametrize("mode", ["outputs", "full"])
async def test_a_backend_that_cannot_fork_is_an_error_that_names_it(mode: str) -> None:
    sandbox = Forkless()
    with pytest.raises(VerifierError, match=r"Forkless backend cannot start a fresh sandbox.*'in-place'"):
        await verify(dataclasses.replace(TASK, verifier_mode=mode), sandbox)  # type: ignore[arg-type]
    assert sandbox.commands == []  # nothing ran in the agent's sandbox


async def test_in_place_when_the_task_asks_for_it() -> None:
    sandbox = Forkless()
    verdict = await verify(dataclasses.replace(TASK, verifier_mode="in-place"), sandbox)
    assert (verdict.reward, verdict.mode) == (1.0, "in-place")
    assert any("/tests/test.sh" in cmd for cmd in sandbox.commands)


async def run_oracle(env: ares.CodeEnvironment) -> list[tuple[str, float | None, str | None]]:
    out = []
    async with env:
        for index in range(len(env.tasks)):
            ts = await env.reset(task=index)
            assert env.task is not None and env.episode is not None
            policy = make_policy("oracle")(env.task, env.action_format)
            while not ts.last():
                ts = await env.step(await policy.act(ts.observation))
            out.append((env.episode.status.value, ts.reward, env.episode.verifier_mode))
    return out


@pytest.mark.parametrize("warm_pool", [0, 2])
async def test_a_warm_pool_verifies_in_a_fork(warm_pool: int) -> None:
    env = ares.make("humaneval", tasks="0:2", warm_pool=warm_pool)
    assert await run_oracle(env) == [(EpisodeStatus.FINISHED.value, 1.0, "outputs")] * 2


async def test_an_agent_inside_a_pooled_sandbox_reaches_the_proxy() -> None:
    """The command log passes the loopback listener on by name, through a warm pool too."""
    env = ares.make("humaneval-cli", tasks="0:2", warm_pool=1)
    assert await run_oracle(env) == [(EpisodeStatus.FINISHED.value, 1.0, "outputs")] * 2


async def test_make_can_ask_for_in_place() -> None:
    env = ares.make("humaneval", tasks="0", verifier_mode="in-place")
    assert await run_oracle(env) == [(EpisodeStatus.FINISHED.value, 1.0, "in-place")]


async def finish_with_oracle(env: ares.CodeEnvironment, ts: Any) -> tuple[float | None, str | None]:
    assert env.task is not None and env.episode is not None
    policy = make_policy("oracle")(env.task, env.action_format)
    while not ts.last():
        ts = await env.step(await policy.act(ts.observation))
    return ts.reward, env.episode.verifier_mode


@pytest.mark.parametrize("warm_pool", [0, 1])
async def test_episodes_restored_from_a_snapshot_verify_in_a_fork(warm_pool: int) -> None:
    """A sandbox made from a snapshot (and one snapshotted through a pool) is verified in a fork too."""
    from ares.snapshot import restore

    env = ares.make("humaneval", tasks="0", warm_pool=warm_pool)
    async with env:
        ts = await env.reset(task=0)
        snapshot = await env.snapshot()
        assert await finish_with_oracle(env, ts) == (1.0, "outputs")
        target = ares.make("humaneval", tasks="0", warm_pool=warm_pool)
        async with target:
            assert await finish_with_oracle(target, await target.restore(snapshot)) == (1.0, "outputs")
        forked = await restore(snapshot)  # on the factory the snapshot was taken with (the pool's)
        async with forked:
            ts = await forked.restore(snapshot)  # once more, for its TimeStep
            assert await finish_with_oracle(forked, ts) == (1.0, "outputs")
