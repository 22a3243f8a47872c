"""AresVectorEnv lifecycle over real environments: close mid-episode, sub-environment failures, bad input."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import numpy as np
import pytest
from gymnasium.error import ClosedEnvironmentError, ResetNeeded

import ares
from ares.agents.bash import BashActionFormat
from ares.core.status import EpisodeStatus
from ares.envs.code_env import CodeEnvironment
from ares.errors import SandboxError, TaskNotFoundError, UnknownPresetError
from ares.llm.types import LLMResponse
from ares.sandbox.base import SandboxSpec
from ares.sandbox.local import LocalSandbox
from ares.wrappers.gym.vector import AresVectorEnv, SubEnvironmentError, make_vector_env

FMT = BashActionFormat()
SUBMIT = FMT.submit()
BUSY = FMT.command("echo busy")


def new_threads(before: set[threading.Thread]) -> list[threading.Thread]:
    """Threads started since ``before`` that are still alive (given a moment to finish)."""
    alive = []
    for thread in set(threading.enumerate()) - before:
        thread.join(timeout=10)
        if thread.is_alive():
            alive.append(thread)
    return alive


class Sandboxes:
    """A sandbox factory that records every real local sandbox it makes (and where it keeps its files)."""

    def __init__(self) -> None:
        self.made: list[LocalSandbox] = []
        self.dirs: list[Path] = []

    def __call__(self, spec: SandboxSpec) -> LocalSandbox:
        sandbox = RecordingSandbox(spec, self)
        self.made.append(sandbox)
        return sandbox

    @property
    def running(self) -> list[LocalSandbox]:
        return [sb for sb in self.made if sb.running]


class RecordingSandbox(LocalSandbox):
    def __init__(self, spec: SandboxSpec, owner: Sandboxes) -> None:
        super().__init__(spec)
        self._owner = owner

    async def start(self) -> None:
        await super().start()
        self._owner.dirs.append(self.diff_dir.parent)


class FailingSandbox(LocalSandbox):
    """The host refuses a new sandbox (what a full disk or a missing kernel feature looks like)."""

    async def start(self) -> None:
        raise SandboxError("injected: the host cannot start another sandbox")


class FailAfter(Sandboxes):
    """Starts ``healthy`` real sandboxes, then every further one fails to start."""

    def __init__(self, healthy: int) -> None:
        super().__init__()
        self.healthy = healthy

    def __call__(self, spec: SandboxSpec) -> LocalSandbox:
        if len(self.made) < self.healthy:
            return super().__call__(spec)
        sandbox = FailingSandbox(spec)
        self.made.append(sandbox)
        return sandbox


@pytest.fixture
def no_leaked_threads() -> Iterator[None]:
    before = set(threading.enumerate())
    yield
    assert new_threads(before) == []


def ares_envs(vec: AresVectorEnv) -> list[CodeEnvironment]:
    return [cast(CodeEnvironment, env.unwrapped_ares) for env in vec.envs]


@pytest.mark.usefixtures("no_leaked_threads")
def test_close_mid_episode_stops_every_sandbox_and_the_private_loop() -> None:
    sandboxes = Sandboxes()
    vec = make_vector_env("humaneval", 8, tasks="0:8", sandbox_factory=sandboxes)
    assert not vec.private_loop.closed
    vec.reset(seed=0)
    vec.step([BUSY] * 8)
    episodes = [env.episode for env in ares_envs(vec)]
    assert len(sandboxes.running) == 8 and all(d.exists() for d in sandboxes.dirs)

    vec.close()
    assert vec.closed and vec.private_loop.closed
    assert sandboxes.running == [] and not any(d.exists() for d in sandboxes.dirs)
    assert all(e is not None and e.status is EpisodeStatus.ABORTED for e in episodes)
    assert all(env.closed for env in ares_envs(vec))
    with pytest.raises(ClosedEnvironmentError, match="closed"):
        vec.step([BUSY] * 8)
    with pytest.raises(ClosedEnvironmentError, match="closed"):
        vec.reset()
    vec.close()  # idempotent


@pytest.mark.usefixtures("no_leaked_threads")
def test_a_failing_autoreset_names_its_slot_and_leaves_the_vector_env_closable() -> None:
    healthy, flaky = Sandboxes(), FailAfter(healthy=1)
    envs = [
        ares.make("humaneval", tasks="0:3", sandbox_factory=flaky if i == 2 else healthy) for i in range(4)
    ]
    vec = AresVectorEnv(envs)
    try:
        vec.reset(seed=0)
        _, _, terminated, _, _ = vec.step([BUSY, BUSY, SUBMIT, BUSY])
        np.testing.assert_array_equal(terminated, [False, False, True, False])
        # Slot 2's autoreset cannot get a sandbox; the other three still take their step.
        with pytest.raises(SubEnvironmentError, match=r"step\(\) failed.*\[2\] SandboxError") as raised:
            vec.step([BUSY, BUSY, None, BUSY])
        assert list(raised.value.failures) == [2]
        assert isinstance(raised.value.__cause__, SandboxError)
        assert [env.episode.steps for env in ares_envs(vec)] == [2, 2, 0, 2]  # type: ignore[union-attr]
        with pytest.raises(ResetNeeded, match="reset"):
            vec.step([BUSY] * 4)
        assert len(healthy.running) == 3 and flaky.running == []
    finally:
        vec.close()
    assert healthy.running == [] and not any(d.exists() for d in healthy.dirs + flaky.dirs)


@pytest.mark.usefixtures("no_leaked_threads")
def test_a_failing_reset_is_reported_and_a_later_reset_recovers() -> None:
    healthy, flaky = Sandboxes(), FailAfter(healthy=0)
    envs = [ares.make("humaneval", tasks="0:3", sandbox_factory=healthy) for _ in range(3)]
    envs.insert(1, ares.make("humaneval", tasks="0:3", sandbox_factory=flaky))
    with AresVectorEnv(envs) as vec:
        with pytest.raises(SubEnvironmentError, match=r"reset\(\) failed.*\[1\] SandboxError"):
            vec.reset(seed=0)
        assert len(healthy.running) == 3
        with pytest.raises(ResetNeeded, match="reset"):
            vec.step([BUSY] * 4)
        flaky.healthy = 10  # the host recovers
        observations, _ = vec.reset(seed=0)
        assert len(observations) == 4 and len(healthy.running) == 3 and len(flaky.running) == 1
    assert healthy.running == [] and flaky.running == []


@pytest.mark.usefixtures("no_leaked_threads")
def test_bad_batches_are_rejected_before_any_sub_environment_moves() -> None:
    with make_vector_env("humaneval", 3, tasks="0:3") as vec:
        with pytest.raises(ResetNeeded, match="reset"):
            vec.step([BUSY] * 3)
        with pytest.raises(ValueError, match="2 seeds for 3"):
            vec.reset(seed=[1, 2])
        vec.reset(seed=0)
        with pytest.raises(ValueError, match="2 actions for 3"):
            vec.step([BUSY, BUSY])
        with pytest.raises(ValueError, match=r"actions\[1\] \(str\) is not in the single action space"):
            vec.step([BUSY, "echo hi", BUSY])
        with pytest.raises(ValueError, match=r"actions\[2\]"):
            vec.step([BUSY, BUSY, LLMResponse(content=42)])  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="reset_mask"):
            vec.reset(options={"reset_mask": [True, False, True]})
        assert [env.episode.steps for env in ares_envs(vec)] == [0, 0, 0]  # type: ignore[union-attr]
        vec.step([BUSY] * 3)  # still usable
        assert [env.episode.steps for env in ares_envs(vec)] == [1, 1, 1]  # type: ignore[union-attr]


@pytest.mark.usefixtures("no_leaked_threads")
def test_bad_construction_fails_clearly_and_closes_what_was_built() -> None:
    with pytest.raises(UnknownPresetError, match="no-such-preset"):
        make_vector_env("no-such-preset", 2)
    with pytest.raises(ValueError, match="num_envs must be >= 1"):
        make_vector_env("humaneval", 0)
    with pytest.raises(ValueError, match="at least one"):
        AresVectorEnv([])

    built: list[CodeEnvironment] = []
    selections = iter(["0", "1", "no-such-task"])

    def factory() -> CodeEnvironment:
        env = ares.make("humaneval", tasks=next(selections))
        built.append(env)
        return env

    with pytest.raises(TaskNotFoundError, match="no-such-task"):
        AresVectorEnv(factory, 3)
    assert len(built) == 2 and all(env.closed for env in built)
