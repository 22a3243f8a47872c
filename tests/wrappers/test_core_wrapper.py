"""core.Wrapper forwards its declared seams by name, claims snapshots only when its environment has
them, and forwards nothing else (no ``__getattr__``)."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import pytest

from ares.core import (
    EpisodicEnvironment,
    PlainEnvironment,
    SnapshottingEnvironment,
    TimeStep,
    Wrapper,
    episodic,
    restart,
    termination,
    transition,
)
from ares.core.snapshotting import SNAPSHOT_MEMBERS
from ares.core.status import EpisodeStatus
from ares.errors import SnapshotError
from ares.records.collecting import TrajectoryCollectingEnvironment

EPISODIC_MEMBERS = ("episode", "task", "tasks", "action_format", "observation", "closed", "abort")


class PlainEnv:
    """reset/step/close only, plus an attribute no seam declares."""

    def __init__(self) -> None:
        self.closes = 0
        self.secret = "not forwarded"

    async def reset(self, *, seed: int | None = None, task: Any | None = None) -> TimeStep[str]:
        return restart("first")

    async def step(self, action: str) -> TimeStep[str]:
        return termination(1.0) if action == "stop" else transition(f"after {action}")

    async def close(self) -> None:
        self.closes += 1

    async def __aenter__(self) -> PlainEnv:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


@dataclass
class FakeTask:
    id: str


class SeamEnv(PlainEnv):
    """Declares the episodic and the snapshot seams, each member with a recognisable value."""

    def __init__(self) -> None:
        super().__init__()
        self.episode = None
        self.task = FakeTask("t0")
        self.tasks = (FakeTask("t0"), FakeTask("t1"))
        self.action_format = "format"
        self.observation = "pending"
        self.closed = False
        self.calls: list[tuple[str, Any]] = []

    async def abort(self, error: BaseException | None = None) -> None:
        self.calls.append(("abort", error))

    async def snapshot(self) -> str:
        return "snap"

    async def restore(self, snapshot: Any) -> TimeStep[str]:
        self.calls.append(("restore", snapshot))
        return transition("restored")

    async def fork(self, n: int) -> list[SeamEnv]:
        return [SeamEnv() for _ in range(n)]


def statically_has(obj: object, name: str) -> bool:
    """What ``isinstance`` against a runtime protocol sees on Python 3.12+ (no ``__getattr__``)."""
    try:
        inspect.getattr_static(obj, name)
    except AttributeError:
        return False
    return True


def test_a_wrapper_over_an_env_without_snapshots_does_not_claim_them() -> None:
    wrapper = Wrapper(PlainEnv())
    assert not isinstance(wrapper, SnapshottingEnvironment)
    for name in SNAPSHOT_MEMBERS:
        assert not hasattr(wrapper, name)
        assert not statically_has(wrapper, name)


def test_a_wrapper_over_an_env_with_snapshots_claims_and_forwards_them() -> None:
    env = SeamEnv()
    wrapper = Wrapper(env)
    assert isinstance(wrapper, SnapshottingEnvironment)
    assert all(statically_has(wrapper, name) for name in SNAPSHOT_MEMBERS)
    assert isinstance(Wrapper(wrapper), SnapshottingEnvironment)  # through a chain of wrappers


async def test_snapshot_members_reach_the_wrapped_env() -> None:
    env = SeamEnv()
    wrapper: Any = Wrapper(Wrapper(env))
    assert await wrapper.snapshot() == "snap"
    assert (await wrapper.restore("snap")).observation == "restored"
    assert env.calls == [("restore", "snap")]
    assert len(await wrapper.fork(2)) == 2


async def test_release_members_are_forwarded_only_where_the_wrapped_env_has_them() -> None:
    from ares.core.releasing import RELEASE_MEMBERS, ReleasingEnvironment

    calls: list[str] = []

    class ReleasingEnv(PlainEnv):
        async def release(self) -> None:
            calls.append("release")

        async def reacquire(self) -> None:
            calls.append("reacquire")

    wrapper: Any = Wrapper(Wrapper(ReleasingEnv()))
    assert isinstance(wrapper, ReleasingEnvironment) and not isinstance(wrapper, SnapshottingEnvironment)
    await wrapper.release()
    await wrapper.reacquire()
    assert calls == ["release", "reacquire"]
    plain = Wrapper(PlainEnv())
    assert not isinstance(plain, ReleasingEnvironment)
    assert not any(statically_has(plain, name) for name in RELEASE_MEMBERS)


def test_a_wrapper_is_always_episodic_and_a_plain_env_s_missing_parts_are_declared_absent() -> None:
    wrapper = Wrapper(PlainEnv())
    assert isinstance(wrapper, EpisodicEnvironment)
    assert all(statically_has(wrapper, name) for name in EPISODIC_MEMBERS)
    assert (wrapper.episode, wrapper.task, wrapper.tasks, wrapper.action_format) == (None, None, (), None)
    assert wrapper.observation is None and not wrapper.closed


@pytest.mark.parametrize("name", [m for m in EPISODIC_MEMBERS if m != "abort"])
def test_a_wrapper_forwards_each_episodic_member(name: str) -> None:
    env = SeamEnv()
    assert getattr(Wrapper(Wrapper(env)), name) is getattr(env, name)


async def test_a_wrapper_forwards_abort_and_close() -> None:
    env = SeamEnv()
    wrapper = Wrapper(env)
    error = RuntimeError("policy failed")
    await wrapper.abort(error)
    assert env.calls == [("abort", error)]
    async with wrapper:
        pass
    assert env.closes == 1


async def test_a_wrapper_over_a_plain_env_follows_its_observation_and_closing() -> None:
    env = PlainEnv()
    wrapper = Wrapper(env)
    await wrapper.reset()
    assert wrapper.observation == "first"
    await wrapper.step("a")
    assert wrapper.observation == "after a"
    await wrapper.step("stop")
    assert wrapper.observation is None  # LAST: nothing awaits an action
    await wrapper.abort(RuntimeError("x"))  # nothing to end early: the env stays open
    assert not wrapper.closed and env.closes == 0
    await wrapper.close()
    assert wrapper.closed and env.closes == 1


@pytest.mark.parametrize("name", ["secret", "closes", "drain_commands", "name", "_private"])
def test_an_undeclared_name_is_not_forwarded(name: str) -> None:
    wrapper = Wrapper(SeamEnv())
    with pytest.raises(AttributeError):
        getattr(wrapper, name)
    assert wrapper.env.closes == 0  # reachable by name through ``env``


def test_a_subclass_that_changes_a_snapshot_member_keeps_its_own() -> None:
    class Restoring(Wrapper[Any, Any]):
        async def restore(self, snapshot: Any) -> TimeStep[Any]:
            return restart("mine")

    wrapper = Restoring(SeamEnv())
    assert type(wrapper).restore is Restoring.restore
    assert "restore" not in vars(wrapper) and "snapshot" in vars(wrapper)


async def test_the_recording_wrapper_over_a_plain_env_does_not_claim_snapshots() -> None:
    wrapper = TrajectoryCollectingEnvironment(PlainEnv())
    assert not isinstance(wrapper, SnapshottingEnvironment)
    assert not statically_has(wrapper, "snapshot")
    with pytest.raises(SnapshotError, match="cannot snapshot"):
        await wrapper.fork(2)
    assert isinstance(TrajectoryCollectingEnvironment(SeamEnv()), SnapshottingEnvironment)


def test_episodic_keeps_an_episodic_env_and_adapts_a_plain_one() -> None:
    env = SeamEnv()
    assert episodic(env) is env
    adapted = episodic(PlainEnv())
    assert isinstance(adapted, PlainEnvironment) and isinstance(adapted, EpisodicEnvironment)


def test_the_episode_view_matches_the_code_environment_episode() -> None:
    from ares.core.episodic import EpisodeView
    from ares.envs.episode import Episode

    episode = Episode(id="e", task_id="t", seed=1)
    members = [n for n, _ in inspect.getmembers(EpisodeView) if not n.startswith("_")]
    assert members and all(statically_has(episode, n) for n in members)
    assert episode.status is EpisodeStatus.RUNNING


def test_a_code_environment_declares_both_seams_and_a_recording_wrapper_keeps_them() -> None:
    from ares.envs.code_env import CodeEnvironment
    from ares.presets import BashAgentFactory
    from ares.sandbox.local import LocalSandbox
    from ares.tasks.model import Task

    env = CodeEnvironment(
        [Task(id="t", instruction="hi", tests={"test.sh": "exit 0"})],
        agent_factory=BashAgentFactory(),
        sandbox_factory=LocalSandbox,
    )
    assert isinstance(env, EpisodicEnvironment) and isinstance(env, SnapshottingEnvironment)
    assert episodic(env) is env  # the runner reads it as it is, never through the adapter
    for name in (*EPISODIC_MEMBERS, *SNAPSHOT_MEMBERS):
        assert statically_has(env, name), name
    recording = TrajectoryCollectingEnvironment(env)
    assert isinstance(recording, SnapshottingEnvironment)
    assert recording.tasks is env.tasks and recording.action_format is env.action_format
