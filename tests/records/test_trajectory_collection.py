"""TrajectoryCollectingEnvironment on real CodeEnvironment episodes: every way an episode can end."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import ares
from ares.agents.bash import BashActionFormat
from ares.errors import TaskNotFoundError
from ares.llm.types import LLMRequest, LLMResponse
from ares.policies import make_policy
from ares.records import (
    EpisodeRecord,
    JsonDirCollector,
    JsonlCollector,
    TrajectoryCollectingEnvironment,
    load_episodes,
)

FMT = BashActionFormat()


def collectors(tmp_path: Path) -> list[tuple[str, object, Path]]:
    return [
        ("json", JsonDirCollector(tmp_path / "dir"), tmp_path / "dir"),
        ("jsonl", JsonlCollector(tmp_path / "events.jsonl"), tmp_path / "events.jsonl"),
    ]


@pytest.mark.parametrize("kind", ["json", "jsonl"])
async def test_finished_episode_is_recorded_losslessly(tmp_path: Path, kind: str) -> None:
    _, collector, where = next(c for c in collectors(tmp_path) if c[0] == kind)
    env = TrajectoryCollectingEnvironment(ares.make("humaneval", tasks="0:2"), collector, trace="full")
    seen = []
    async with env:
        ts = await env.reset(task=0, seed=7)
        seen.append(ts.observation)
        policy = make_policy("oracle")(env.unwrapped.task, env.unwrapped.action_format)
        while not ts.last():
            action = await policy.act(ts.observation)
            ts = await env.step(action)
            seen.append(action)
    (episode,) = load_episodes(where)
    assert episode.status == "finished" and episode.total_reward == 1.0 and episode.task_id == "humaneval_0"
    assert episode.ended_at is not None and episode.env["class"] == "CodeEnvironment"
    assert [s.step_type for s in episode.steps] == ["FIRST", "MID", "LAST"]
    assert episode.steps[0].observation == seen[0]  # the LLMRequest object, field for field
    assert [s.action for s in episode.steps[1:]] == seen[1:]
    assert episode.steps[-1].discount == 0.0 and episode.steps[-1].reward == 1.0
    commands = episode.steps[1].trace["env_state"]["commands"]
    assert commands and commands[0]["exit_code"] == 0 and "stdout" in commands[0]
    assert isinstance(episode.steps[-1].trace["reward"]["reward"], float)
    assert episode.metadata["episode"]["verifier_stdout"] is not None
    assert EpisodeRecord.from_json(episode.to_json()) == episode


async def test_truncated_abandoned_and_aborted(tmp_path: Path) -> None:
    collector = JsonDirCollector(tmp_path)
    env = TrajectoryCollectingEnvironment(ares.make("humaneval", tasks="0:3", step_limit=2), collector)
    ts = await env.reset(task=0)
    ts = await env.step(FMT.command("echo one"))
    ts = await env.step(FMT.command("echo two"))
    assert ts.last() and ts.discount == 1.0
    await env.reset(task=1)  # left running ...
    await env.step(FMT.command("echo three"))
    await env.reset(task=2)  # ... abandoned by this reset; this one is aborted by close()
    await env.close()
    by_task = {e.task_id: e for e in load_episodes(tmp_path)}
    assert by_task["humaneval_0"].status == "truncated" and by_task["humaneval_0"].truncation == "step_limit"
    assert by_task["humaneval_1"].status == "abandoned" and len(by_task["humaneval_1"].steps) == 2
    assert by_task["humaneval_2"].status == "aborted" and by_task["humaneval_2"].ended_at is not None


async def test_context_exit_aborts_and_errors_are_recorded(tmp_path: Path) -> None:
    collector = JsonlCollector(tmp_path / "t.jsonl")
    with pytest.raises(RuntimeError, match="boom"):
        async with TrajectoryCollectingEnvironment(ares.make("humaneval", tasks="0:1"), collector) as env:
            await env.reset(task=0)
            raise RuntimeError("boom")
    env = TrajectoryCollectingEnvironment(ares.make("humaneval", tasks="0:1"), collector)
    with pytest.raises(TaskNotFoundError):
        await env.reset(task="no-such-task")
    await env.close()
    first, second = load_episodes(tmp_path / "t.jsonl")
    assert first.status == "aborted"
    assert second.status == "errored" and second.error is not None
    assert second.error.type == "TaskNotFoundError" and "no-such-task" in second.error.message


async def test_cancelled_step_keeps_what_was_recorded(tmp_path: Path) -> None:
    env = TrajectoryCollectingEnvironment(ares.make("humaneval", tasks="0:1"), JsonDirCollector(tmp_path))
    await env.reset(task=0)
    step = asyncio.create_task(env.step(FMT.command("sleep 30")))
    await asyncio.sleep(0.5)
    step.cancel()
    with pytest.raises(asyncio.CancelledError):
        await step
    await env.close()
    (episode,) = load_episodes(tmp_path)
    assert episode.status == "cancelled"
    assert [s.step_type for s in episode.steps] == ["FIRST", "LAST"]
    assert episode.steps[-1].observation is None and episode.steps[-1].action == FMT.command("sleep 30")


async def test_agent_crash_mid_episode_is_errored_with_its_trace(tmp_path: Path) -> None:
    env = TrajectoryCollectingEnvironment(ares.make("humaneval", tasks="0:1"), JsonDirCollector(tmp_path))
    await env.reset(task=0)
    await env.step(FMT.command("echo alive"))
    sandbox = env.unwrapped.sandbox
    assert sandbox is not None
    await sandbox.stop()  # the machine dies under the agent
    ts = await env.step(FMT.command("echo still there?"))
    assert ts.last()
    await env.close()
    (episode,) = load_episodes(tmp_path)
    assert episode.status == "errored" and episode.error is not None
    last = episode.steps[-1]
    assert last.trace is not None and last.observation is None
    # the prompt the failing action answered: the previous step's observation, not the (absent) next
    assert last.trace["prompt"][-1]["content"] == episode.steps[-2].observation.messages[-1].content


async def test_trace_levels(tmp_path: Path) -> None:
    for level in ("off", "basic", "full"):
        where = tmp_path / level
        env = TrajectoryCollectingEnvironment(
            ares.make("humaneval", tasks="0:1"), JsonDirCollector(where), trace=level
        )
        first = await env.reset(task=0)
        ts = await env.step(FMT.command("echo traced"))
        await env.close()
        (episode,) = load_episodes(where)
        step = episode.steps[1]
        if level == "off":
            assert step.trace is None
            continue
        assert isinstance(ts.observation, LLMRequest) and isinstance(first.observation, LLMRequest)
        # the prompt the action answered (the reset's), never the next one that already holds its reply
        assert step.trace["prompt"][-1]["content"] == first.observation.messages[-1].text
        assert "traced" not in json.dumps(step.trace["prompt"])
        assert episode.steps[0].trace["prompt"] is None and episode.steps[0].trace["response"] is None
        assert step.trace["response"]["content"] == FMT.command("echo traced").content
        (command,) = step.trace["env_state"]["commands"]
        assert command["cmd"].strip() == "echo traced" and command["exit_code"] == 0
        assert ("stdout" in command) is (level == "full")


def test_files_are_valid_json_after_every_event(tmp_path: Path) -> None:
    collector = JsonDirCollector(tmp_path)
    env = TrajectoryCollectingEnvironment(ares.make("humaneval", tasks="0:1"), collector)

    async def play() -> None:
        await env.reset(task=0)
        for i in range(3):
            await env.step(FMT.command(f"echo {i}"))
            collector.flush()  # what a step queued is on disk once the writer has run
            (path,) = tmp_path.glob("*.json")
            data = json.loads(path.read_text())
            assert data["status"] == "running" and len(data["steps"]) == i + 2
        await env.close()

    asyncio.run(play())
    assert not list(tmp_path.glob(".*.tmp"))


async def test_unparseable_response_step_keeps_its_trace(tmp_path: Path) -> None:
    env = TrajectoryCollectingEnvironment(
        ares.make("humaneval", tasks="0:1"), JsonDirCollector(tmp_path), trace="full"
    )
    async with env:
        await env.reset(task=0)
        ts = await env.step(LLMResponse(content="I will not use the command format."))
        assert not ts.last()  # the agent tells the model its reply was malformed and goes on
    (episode,) = load_episodes(tmp_path)
    trace = episode.steps[1].trace
    assert trace is not None and trace["response"]["content"] == "I will not use the command format."
    assert trace["env_state"]["commands"] == []  # nothing ran
    assert trace["prompt"][-1]["role"] == "user"  # the agent's format complaint, as the policy saw it


@pytest.mark.parametrize("trace", ["off", "basic"])
async def test_traces_turn_the_command_log_on_and_off_leaves_it_off(tmp_path: Path, trace: str) -> None:
    """Only traces read commands: a collector without them leaves the environment keeping none."""
    inner = ares.make("humaneval", tasks="0:1")
    env = TrajectoryCollectingEnvironment(inner, JsonlCollector(tmp_path / "e.jsonl"), trace=trace)
    assert inner.log_commands is (trace != "off")
    async with env:
        ts = await env.reset(task=0)
        ts = await env.step(FMT.command("echo logged"))
        while not ts.last():
            ts = await env.step(FMT.submit())
    (episode,) = load_episodes(tmp_path / "e.jsonl")
    if trace == "off":
        assert all(step.trace is None for step in episode.steps)
    else:
        assert [c["cmd"] for c in episode.steps[1].trace["env_state"]["commands"]] == ["echo logged"]
