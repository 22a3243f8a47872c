"""Episodes become exact training sequences: turns that extend each other join, a rewritten history
starts a new sequence, environment tokens are masked out, and rewards follow the episode's status."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import ares
from ares.llm.local.default_model import installed_default_model
from ares.llm.types import LLMRequest, LLMResponse
from ares.records.collectors import JsonDirCollector, MemoryCollector
from ares.records.model import EpisodeRecord
from ares.training import (
    MissingTokensError,
    TokenSequence,
    collect_rollouts,
    episode_sequences,
    group_advantages,
    token_sequences,
)
from ares.training.sequences import load_sequences_jsonl, write_sequences_jsonl
from training_records import episode, request, response

LOCAL = importlib.util.find_spec("xllamacpp") is not None and installed_default_model() is not None


def test_a_single_turn_is_prompt_plus_completion_all_sampled() -> None:
    (s,) = token_sequences(episode([(request([1, 2, 3]), response([7, 8], [-0.5, -0.25]))]))
    assert (s.prompt_ids, s.completion_ids, s.mask, s.logprobs) == ((1, 2, 3), (7, 8), (1, 1), (-0.5, -0.25))
    assert (s.reward, s.status, s.index, s.group_id) == (1.0, "finished", 3, "g0")
    assert (s.turns, s.sampled_tokens) == (1, 2)


def test_extending_turns_join_and_environment_tokens_are_masked_out() -> None:
    turns = [
        (request([1, 2]), response([5, 6], [-1.0, -2.0])),
        (request([1, 2, 5, 6, 9, 9]), response([7], [-3.0])),  # 9, 9: the tool output + template
        (request([1, 2, 5, 6, 9, 9, 7, 4]), response([8], [-4.0])),
    ]
    (s,) = token_sequences(episode(turns))
    assert s.prompt_ids == (1, 2)
    assert s.completion_ids == (5, 6, 9, 9, 7, 4, 8)
    assert s.mask == (1, 1, 0, 0, 1, 0, 1)
    assert s.logprobs == (-1.0, -2.0, 0.0, 0.0, -3.0, 0.0, -4.0)
    assert s.turns == 3 and s.sampled_tokens == 4


def test_a_rewritten_history_starts_a_new_sequence() -> None:
    turns = [
        (request([1, 2]), response([5, 6], [-1.0, -2.0])),
        (request([1, 2, 6, 6]), response([7], [-3.0])),  # does not start with 1, 2, 5, 6
        (request([1, 2, 6, 6, 7, 0]), response([8], [-4.0])),
    ]
    first, second = token_sequences(episode(turns))
    assert (first.prompt_ids, first.completion_ids, first.turns) == ((1, 2), (5, 6), 1)
    assert (second.prompt_ids, second.completion_ids, second.mask) == ((1, 2, 6, 6), (7, 0, 8), (1, 0, 1))


def test_the_ids_the_policy_was_fed_win_over_the_observation() -> None:
    (s,) = token_sequences(episode([(request(None), response([7], [-0.1], fed=[4, 4]))]))
    assert s.prompt_ids == (4, 4)


def test_missing_logprobs_leave_the_sequence_without_logprobs() -> None:
    turns = [(request([1]), response([5], [-1.0])), (request([1, 5, 0]), response([6]))]
    (s,) = token_sequences(episode(turns))
    assert s.logprobs is None and s.completion_ids == (5, 0, 6)


@pytest.mark.parametrize(
    ("turn", "what"),
    [
        ((request(None), response([5])), "no prompt token ids"),
        ((request([1]), response(None)), "no completion"),
    ],
)
def test_a_text_only_turn_is_a_clear_error(turn: tuple[LLMRequest, LLMResponse], what: str) -> None:
    with pytest.raises(MissingTokensError, match=what):
        token_sequences(episode([turn]))


def test_mismatched_logprobs_are_a_clear_error() -> None:
    with pytest.raises(MissingTokensError, match="1 logprobs for 2 tokens"):
        token_sequences(episode([(request([1]), response([5, 6], [-1.0]))]))


@pytest.mark.parametrize("status", ["errored", "cancelled", "aborted"])
def test_episodes_without_a_verdict_have_no_reward(status: str) -> None:
    (s,) = token_sequences(episode([(request([1]), response([5], [-1.0]))], status=status, reward=0.0))
    assert s.reward is None and s.status == status


def test_truncated_episodes_keep_their_reward() -> None:
    (s,) = token_sequences(episode([(request([1]), response([5], [-1.0]))], status="truncated", reward=0.0))
    assert s.reward == 0.0


def sample(group: str, reward: float | None) -> TokenSequence:
    return TokenSequence("e", "t", 0, group, "finished", reward, (1,), (2,), (1,), (-1.0,), 1)


def test_group_advantages_are_relative_to_each_group_and_skip_missing_rewards() -> None:
    batch = [sample("a", 1.0), sample("a", 0.0), sample("b", 1.0), sample("b", 1.0), sample("b", None)]
    adv = group_advantages(batch, eps=0.0 + 1e-9)
    assert adv[0] == pytest.approx(1.0) and adv[1] == pytest.approx(-1.0)
    assert adv[2:] == [0.0, 0.0, 0.0]  # a group that agrees teaches nothing; no reward, no advantage
    assert group_advantages(batch, scale=False)[:2] == [0.5, -0.5]


def test_the_memory_collector_hands_over_live_episodes_once() -> None:
    collector = MemoryCollector()
    ep = episode([(request([1]), response([5], [-1.0]))])
    collector.begin_episode(EpisodeRecord("e1", "t", 0, {}, 0.0))
    for step in ep.steps:
        collector.record_step("e1", step)
    collector.end_episode("e1", status="finished", ended_at=1.0, total_reward=1.0, metadata={"k": 1})
    (taken,) = collector.take()
    assert taken.steps == ep.steps and taken.status == "finished" and taken.metadata == {"k": 1}
    assert taken.steps[1].action is ep.steps[1].action  # the live object, not a decoded copy
    assert collector.take() == []


async def test_collect_rollouts_refuses_a_text_policy_clearly() -> None:
    with pytest.raises(MissingTokensError, match="token-level policy"):
        await collect_rollouts(
            lambda: ares.make("humaneval-single", tasks="0:1"), ares.make_policy("oracle"), episodes=1
        )


@pytest.mark.skipif(not LOCAL, reason="needs the local extra: pip install 'ares[local]'")
async def test_multi_turn_local_episodes_are_one_exact_sequence_each() -> None:
    from ares.policies.local import local_policy_factory

    policy: Any = local_policy_factory(temperature=0.0, max_tokens=12, max_concurrency=1)
    batch = await collect_rollouts(
        lambda: ares.make("humaneval", tasks="0:1", step_limit=3, token_renderer=policy.token_renderer()),
        policy, episodes=2, group_size=2, concurrency=2,
    )  # fmt: skip
    assert all(r.status in ("finished", "truncated") and r.steps == 3 for r in batch.results)
    for result, per_episode in zip(batch.results, batch.sequences, strict=True):
        (s,) = per_episode  # three bash turns, each prompt extending the last: one sequence
        assert s.turns == 3 and s.group_id == "g0" and s.index == result.index
        assert s.reward == result.reward  # the runner's reward, the sequence's reward
        assert s.sampled_tokens == result.completion_tokens
        assert len(s.prompt_ids) + len(s.completion_ids) > s.sampled_tokens + len(s.prompt_ids)  # env tokens
        assert s.logprobs is not None
        assert all(lp == 0.0 for lp, m in zip(s.logprobs, s.mask, strict=True) if not m)
    assert episode_sequences([]) == []


def record_run(directory: Path, episodes: list[EpisodeRecord]) -> None:
    """Write episodes as a run dir's trajectories/ with the real file collector."""
    with JsonDirCollector(directory / "trajectories") as collector:
        for ep in episodes:
            collector.begin_episode(replace(ep, steps=(), status="running", total_reward=None))
            for step in ep.steps:
                collector.record_step(ep.episode_id, step)
            collector.end_episode(ep.episode_id, status=ep.status, ended_at=1.0, total_reward=ep.total_reward)


def test_sequences_round_trip_through_jsonl(tmp_path: Path) -> None:
    turns = [(request([1, 2]), response([5, 6], [-1.0, -2.0])), (request([1, 2, 5, 6, 9]), response([7]))]
    episodes = [episode(turns), replace(episode(turns[:1], status="errored"), episode_id="e2")]
    path = tmp_path / "out" / "sequences.jsonl"
    assert write_sequences_jsonl(episodes, path) == 2
    assert load_sequences_jsonl(path) == episode_sequences(episodes)
    path.write_text('{"episode_id": "x"}\n')
    with pytest.raises(ValueError, match=r"sequences.jsonl:1: not a token sequence row"):
        load_sequences_jsonl(path)


def test_ares_export_writes_sequences_and_refuses_text_only_runs(tmp_path: Path) -> None:
    turns = [
        (request([1, 2]), response([5, 6], [-1.0, -2.0])),
        (request([1, 2, 5, 6, 9]), response([7], [-3.0])),
    ]
    tokens, text = tmp_path / "tokens", tmp_path / "text"
    record_run(tokens, [episode(turns)])
    record_run(text, [episode([(request(None), response(None))])])
    exe = shutil.which("ares", path=str(Path(sys.executable).parent))
    cmd = [exe] if exe else [sys.executable, "-m", "ares.cli.main"]
    done = subprocess.run(
        [*cmd, "export", str(tokens), "--format", "sequences"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "1/1 episodes -> 1 token sequences" in done.stdout
    (s,) = load_sequences_jsonl(tokens / "sequences.jsonl")
    assert (s.completion_ids, s.mask, s.logprobs) == ((5, 6, 9, 7), (1, 1, 0, 1), (-1.0, -2.0, 0.0, -3.0))
    refused = subprocess.run(
        [*cmd, "export", str(text), "--format", "sequences"], capture_output=True, text=True
    )
    assert refused.returncode == 2 and "has no prompt token ids" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and not (text / "sequences.jsonl").exists()
