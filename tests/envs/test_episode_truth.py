"""One truth per episode: the runner's result, the trajectory record and the episode it embeds agree on
status, reward and error on every path an episode can end by (real sandboxes, tasks and verifier)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import ares
from ares.agents.bash import BashActionFormat
from ares.core.status import EpisodeStatus
from ares.envs.code_env import CodeEnvironment
from ares.errors import EnvironmentStateError, PolicyTimeoutError, SandboxError
from ares.llm.types import LLMRequest, LLMResponse
from ares.policies import make_policy
from ares.records.collecting import TrajectoryCollectingEnvironment
from ares.records.collectors import JsonDirCollector
from ares.records.loader import load_episodes
from ares.rollout.results import EpisodeResult, RunSummary
from ares.rollout.runner import run_episode, run_episodes
from ares.sandbox.local import LocalSandbox
from ares.tasks.model import Task

FMT = BashActionFormat()
NO_REWARD = Task(id="no-reward", instruction="anything", tests={"test.sh": "echo 'forgot the reward'\n"})
SLOW_TESTS = Task(id="slow-tests", instruction="anything", tests={"test.sh": "sleep 30\n"})


class RaisingPolicy:
    async def act(self, observation: LLMRequest) -> LLMResponse:
        raise RuntimeError("the inference server fell over")


class SilentPolicy:
    async def act(self, observation: LLMRequest) -> LLMResponse:
        await asyncio.Event().wait()  # never answers
        raise AssertionError


def custom_env(*tasks: Task) -> CodeEnvironment:
    return CodeEnvironment(
        list(tasks), agent_factory=ares.presets.BashAgentFactory(), sandbox_factory=LocalSandbox
    )


def three_truths(result: EpisodeResult | None, out: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The trajectory on disk and the episode it embeds; both must agree with ``result``."""
    (trajectory,) = load_episodes(out)
    embedded = trajectory.metadata["episode"]
    assert trajectory.status == embedded["status"]
    assert (trajectory.error is None) == (embedded["error"] is None)
    if trajectory.error is not None:
        assert (trajectory.error.type, trajectory.error.message) == (
            embedded["error"]["type"], embedded["error"]["message"],
        )  # fmt: skip
    if result is not None:
        assert str(result.status) == trajectory.status
        assert (result.error is None) == (trajectory.error is None)
        if result.error is not None and trajectory.error is not None:
            assert result.error["type"] == trajectory.error.type
            assert result.error["message"] == trajectory.error.message
        assert result.record["status"] == embedded["status"]
    return {
        "status": trajectory.status,
        "error": trajectory.error,
        "reward": trajectory.total_reward,
    }, embedded


async def run_one(env: CodeEnvironment, policy: Any, out: Path, **kwargs: Any) -> EpisodeResult:
    driver = TrajectoryCollectingEnvironment(env, JsonDirCollector(out))
    try:
        return await run_episode(
            env, lambda task, fmt: policy, index=0, task=0, seed=0, driver=driver, **kwargs
        )
    finally:
        await driver.close()


async def test_policy_that_raises(tmp_path: Path) -> None:
    result = await run_one(ares.make("humaneval", tasks="0:1"), RaisingPolicy(), tmp_path)
    _, embedded = three_truths(result, tmp_path)
    assert result.status is EpisodeStatus.ERRORED and result.reward is None
    assert result.error is not None and result.error["type"] == "RuntimeError"
    assert "fell over" in result.error["message"] and embedded["exit_reason"] == "policy_error"


async def test_policy_that_never_answers_times_out(tmp_path: Path) -> None:
    result = await run_one(
        ares.make("humaneval", tasks="0:1"), SilentPolicy(), tmp_path, policy_timeout_s=0.3
    )
    three_truths(result, tmp_path)
    assert result.status is EpisodeStatus.ERRORED
    assert result.error is not None and result.error["type"] == PolicyTimeoutError.__name__


async def test_verifier_failure(tmp_path: Path) -> None:
    result = await run_one(custom_env(NO_REWARD), make_policy("null")(NO_REWARD, FMT), tmp_path)
    _, embedded = three_truths(result, tmp_path)
    assert result.status is EpisodeStatus.ERRORED and result.error is not None
    assert result.error["type"] == "VerifierError" and embedded["verifier_stdout"] == "forgot the reward\n"


async def test_sandbox_failure_at_reset(tmp_path: Path) -> None:
    def broken(spec: Any) -> LocalSandbox:
        raise SandboxError("no sandbox for you")

    env = CodeEnvironment(
        ares.load_humaneval()[:1], agent_factory=ares.presets.BashAgentFactory(), sandbox_factory=broken
    )
    result = await run_one(env, make_policy("oracle"), tmp_path)
    three_truths(result, tmp_path)
    assert result.status is EpisodeStatus.ERRORED and result.error is not None
    assert result.error["type"] == "SandboxError"


async def test_finished_and_truncated_agree(tmp_path: Path) -> None:
    env = ares.make("humaneval", tasks="0:1", step_limit=1)
    result = await run_one(env, FixedPolicy([FMT.command("true")]), tmp_path / "cut")
    record, embedded = three_truths(result, tmp_path / "cut")
    assert record["status"] == "truncated" and embedded["exit_reason"] == "step_limit"
    oracle = await run_episodes(
        lambda: ares.make("humaneval", tasks="0:1"), make_policy("oracle"), episodes=1,
        collector=JsonDirCollector(tmp_path / "oracle"),
    )  # fmt: skip
    record, embedded = three_truths(oracle[0], tmp_path / "oracle")
    assert (
        record["status"] == "finished" and oracle[0].reward == 1.0 and embedded["exit_reason"] == "submitted"
    )


class FixedPolicy:
    def __init__(self, responses: list[LLMResponse]) -> None:
        self._responses = list(responses)

    async def act(self, observation: LLMRequest) -> LLMResponse:
        return self._responses.pop(0) if self._responses else FMT.submit()


async def test_caller_mistakes_raise_without_ending_the_record(tmp_path: Path) -> None:
    env = TrajectoryCollectingEnvironment(ares.make("humaneval", tasks="0:1"), JsonDirCollector(tmp_path))
    async with env:
        await env.reset(task=0)
        with pytest.raises(TypeError, match="LLMResponse"):
            await env.step("echo hi")  # type: ignore[arg-type]
        ts = await env.step(FMT.command("echo still going"))
        assert not ts.last()
        ts = await env.step(FMT.submit())
        assert ts.last()
        with pytest.raises(EnvironmentStateError):
            await env.step(FMT.submit())
    (trajectory,) = load_episodes(tmp_path)
    assert [s.step_type for s in trajectory.steps] == ["FIRST", "MID", "LAST"]  # no phantom LAST
    assert trajectory.status == trajectory.metadata["episode"]["status"] == "finished"


async def test_reset_and_close_while_active(tmp_path: Path) -> None:
    env = TrajectoryCollectingEnvironment(ares.make("humaneval", tasks="0:2"), JsonDirCollector(tmp_path))
    await env.reset(task=0)
    await env.reset(task=1)  # abandons the first
    await env.close()  # aborts the second
    statuses = sorted((e.status, e.metadata["episode"]["status"]) for e in load_episodes(tmp_path))
    assert statuses == [("abandoned", "abandoned"), ("aborted", "aborted")]


async def test_outer_timeout_while_verifying_is_not_swallowed(tmp_path: Path) -> None:
    env = TrajectoryCollectingEnvironment(custom_env(SLOW_TESTS), JsonDirCollector(tmp_path))
    async with env:
        await env.reset(task=0)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.5):
                await env.step(FMT.submit())  # the tests sleep 30 s
        assert env.unwrapped.sandbox is None  # torn down, nothing left running
    record, _ = three_truths(None, tmp_path)
    assert record["status"] == "cancelled"


async def test_runner_counts_errored_apart_and_groups_errors(tmp_path: Path) -> None:
    policies = {0: make_policy("oracle"), 1: lambda task, fmt: RaisingPolicy()}
    calls = iter(range(100))

    def factory(task: Any, fmt: Any) -> Any:
        return policies[next(calls) % 2](task, fmt)

    results = await run_episodes(
        lambda: ares.make("humaneval", tasks="0:2"), factory, episodes=4, concurrency=1, group_size=2,
        collector=JsonDirCollector(tmp_path),
    )  # fmt: skip
    summary = RunSummary.of(results, 1.0)
    assert summary.errored == 2 and summary.scored == 2
    assert summary.mean_reward == 1.0 and summary.pass_rate == 1.0  # errored episodes are not zeros
    (cause,) = summary.errors
    assert (cause.type, cause.count) == ("RuntimeError", 2) and "fell over" in cause.message
    assert [r.group for r in results] == [0, 0, 1, 1]
    assert [r.task_id for r in results] == [results[0].task_id] * 2 + [results[2].task_id] * 2
    assert {g.group: (g.size, g.errored) for g in summary.groups} == {0: (2, 1), 1: (2, 1)}
    groups = {e.metadata["group_id"] for e in load_episodes(tmp_path)}
    assert groups == {"g0", "g1"}
    assert json.loads(json.dumps(results[1].to_dict()))["error"]["type"] == "RuntimeError"
    assert EpisodeResult.from_dict(results[1].to_dict()).error == results[1].error


class CountdownEnv:
    """A plain Environment (no CodeEnvironment internals): count down from the task number."""

    def __init__(self) -> None:
        self.left = 0

    async def reset(self, *, seed: int | None = None, task: Any | None = None) -> ares.TimeStep[Any]:
        from ares.core.timestep import restart

        self.left = int(task or 0) + 2
        return restart(self.left)

    async def step(self, action: Any) -> ares.TimeStep[Any]:
        from ares.core.timestep import termination, transition

        if action == "boom":
            raise RuntimeError("the environment broke")
        self.left -= 1
        return termination(float(action)) if self.left == 0 else transition(self.left)

    async def close(self) -> None:
        pass

    async def __aenter__(self) -> CountdownEnv:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class EchoPolicy:
    def __init__(self, answer: Any) -> None:
        self.answer = answer

    async def act(self, observation: Any) -> Any:
        return self.answer


async def test_runner_drives_any_environment(tmp_path: Path) -> None:
    results = await run_episodes(
        CountdownEnv, lambda task, fmt: EchoPolicy(1), episodes=3, num_tasks=2,
        collector=JsonDirCollector(tmp_path),
    )  # fmt: skip
    assert [(r.status, r.reward, r.steps, r.task_id) for r in results] == [
        (EpisodeStatus.FINISHED, 1.0, 2, "0"), (EpisodeStatus.FINISHED, 1.0, 3, "1"),
        (EpisodeStatus.FINISHED, 1.0, 2, "0"),
    ]  # fmt: skip
    assert sorted(e.status for e in load_episodes(tmp_path)) == ["finished"] * 3
    broken = await run_episodes(CountdownEnv, lambda task, fmt: EchoPolicy("boom"), episodes=1)
    assert broken[0].status is EpisodeStatus.ERRORED and broken[0].error is not None
    assert broken[0].error["message"] == "the environment broke"


@pytest.mark.parametrize(("clock", "status"), [("agent", "finished"), ("wall", "truncated")])
async def test_the_policys_thinking_time_counts_only_on_the_wall_clock(clock: str, status: str) -> None:
    """A policy slower than the task's whole time limit: the agent clock does not count it."""
    task = _with_timeout(ares.load_humaneval()[0], 0.4)
    env = CodeEnvironment(
        [task], agent_factory=ares.presets.BashAgentFactory(), sandbox_factory=LocalSandbox,
        time_limit_clock=clock,  # type: ignore[arg-type]
    )  # fmt: skip
    async with env:
        ts = await env.reset(task=0)
        await asyncio.sleep(0.8)  # the policy thinks
        ts = await env.step(FMT.command("true"))
        if not ts.last():
            ts = await env.step(FMT.submit())
        assert ts.last() and env.episode is not None
        assert str(env.episode.status) == status
        assert env.episode.policy_latency_s >= 0.8
        if status == "truncated":
            assert env.episode.exit_reason == "time_limit"


def _with_timeout(task: Task, seconds: float) -> Task:
    import dataclasses

    return dataclasses.replace(task, agent_timeout_s=seconds)
