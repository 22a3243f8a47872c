"""The policy's context window: an overflowing prompt ends the episode truncated, with its trace."""

from __future__ import annotations

from pathlib import Path

import pytest

import ares
from ares.agents.bash import BashActionFormat
from ares.envs.context_window import ContextWindow, estimated_prompt_tokens
from ares.errors import TaskError
from ares.llm.types import LLMRequest, user
from ares.records import JsonDirCollector, TrajectoryCollectingEnvironment, load_episodes

FMT = BashActionFormat()


def test_token_count_is_exact_with_token_ids_and_estimated_without() -> None:
    assert estimated_prompt_tokens(LLMRequest(messages=(user("x" * 9),), prompt_token_ids=(1, 2))) == 2
    assert estimated_prompt_tokens(LLMRequest(messages=(user("x" * 9),), system_prompt="abc")) == 3
    with pytest.raises(ValueError, match=">= 1"):
        ContextWindow(0)


async def test_prompt_outgrowing_the_window_truncates_with_a_trace(tmp_path: Path) -> None:
    env = ares.make("humaneval", tasks="0:1")
    first = await env.reset(task=0)
    limit = estimated_prompt_tokens(first.observation) + 200  # room for a step or two, not forty
    await env.close()
    collecting = TrajectoryCollectingEnvironment(
        ares.make("humaneval", tasks="0:1", context_limit=limit), JsonDirCollector(tmp_path), trace="full"
    )
    async with collecting:
        ts = await collecting.reset(task=0)
        steps = 0
        while not ts.last():
            ts = await collecting.step(FMT.command("seq 1 100"))  # ~70 tokens of output per step
            steps += 1
            assert steps < 40
        episode = collecting.unwrapped.episode
        assert episode.status == "truncated" and episode.truncation == "context_limit"
        assert ts.discount == 1.0 and ts.reward == 0.0  # cut, not failed: the verifier still ran
    (record,) = load_episodes(tmp_path)
    assert record.status == "truncated" and record.truncation == "context_limit"
    last = record.steps[-1]
    assert last.trace is not None and last.trace["env_state"]["commands"][0]["cmd"].strip() == "seq 1 100"


async def test_a_first_prompt_over_the_window_is_a_clear_error() -> None:
    env = ares.make("humaneval", tasks="0:1", context_limit=5)
    with pytest.raises(TaskError, match="over the context limit of 5"):
        await env.reset(task=0)
    assert env.episode is not None and env.episode.status == "errored"
    assert env.sandbox is None  # torn down, nothing left running
    await env.close()
