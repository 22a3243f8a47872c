"""Which weights made which tokens: ``LLMResponse.policy_version`` survives every wire form, an API
policy stamps the version its trainer says is serving, and a training sequence carries per-token
version segments beside its logprobs (and its JSONL round-trips them)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path

import pytest

from ares.llm import anthropic_messages, openai_chat, openai_responses
from ares.llm.types import LLMRequest, LLMResponse, user
from ares.policies.client import ClientPolicyFactory
from ares.records.exports.turns import turn_rows
from ares.records.model import EpisodeRecord, StepRecord
from ares.records.policy_call import PolicyCall
from ares.training import token_sequences
from ares.training.sequences import TurnCall, load_sequences_jsonl, write_sequences_jsonl
from training_records import episode, request, response

ANSWER = LLMResponse(content="hi", token_ids=(5, 6), logprobs=(-0.5, -0.25), policy_version=7)


@pytest.mark.parametrize(
    ("to_wire", "from_wire"),
    [
        (openai_chat.response_to_openai, openai_chat.response_from_openai),
        (openai_responses.response_to_responses, openai_responses.response_from_responses),
        (anthropic_messages.response_to_anthropic, anthropic_messages.response_from_anthropic),
    ],
)
def test_the_version_survives_every_dialect(to_wire, from_wire) -> None:  # type: ignore[no-untyped-def]
    wire = to_wire(ANSWER)
    assert wire["ares_policy_version"] == 7
    assert from_wire(wire) == ANSWER
    unversioned = replace(ANSWER, policy_version=None)
    assert (
        "ares_policy_version" not in to_wire(unversioned) and from_wire(to_wire(unversioned)) == unversioned
    )


class _Server:
    """An LLM client whose answers carry a version only when told to (as a server may)."""

    model = "m"

    def __init__(self, sends: int | None) -> None:
        self.sends = sends

    async def __call__(self, request: LLMRequest) -> LLMResponse:
        return LLMResponse(content="ok", policy_version=self.sends)

    async def aclose(self) -> None:
        return None


def test_an_api_policy_stamps_the_trainers_version_unless_the_server_sent_one() -> None:
    step = [3]
    observation = LLMRequest(messages=(user("go"),))
    stamped = ClientPolicyFactory(_Server(None), policy_version=lambda: step[0])(None, None)  # type: ignore[arg-type]
    assert asyncio.run(stamped.act(observation)).policy_version == 3
    step[0] = 4  # the trainer stepped: the next answer is the new version's
    assert asyncio.run(stamped.act(observation)).policy_version == 4
    sent = ClientPolicyFactory(_Server(9), policy_version=1)(None, None)  # type: ignore[arg-type]
    assert asyncio.run(sent.act(observation)).policy_version == 9  # what the server says wins


def test_a_sequence_carries_version_segments_and_they_round_trip(tmp_path: Path) -> None:
    """Three turns that extend each other, answered by versions 1, 1 and 2: two segments over the
    completion, the second starting at the third answer (after the observation tokens before it)."""
    turns = [
        (request([1, 2]), replace(response([10, 11], [-0.1, -0.2]), policy_version=1)),
        (request([1, 2, 10, 11, 20]), replace(response([12], [-0.3]), policy_version=1)),
        (
            request([1, 2, 10, 11, 20, 12, 21, 22]),
            replace(response([13, 14], [-0.4, -0.5]), policy_version=2),
        ),
    ]
    record = episode(turns)
    (s,) = token_sequences(record)
    assert s.completion_ids == (10, 11, 20, 12, 21, 22, 13, 14)
    assert s.mask == (1, 1, 0, 1, 0, 0, 1, 1)
    assert s.version_segments == ((0, 4, 1), (6, 8, 2))
    path = tmp_path / "sequences.jsonl"
    write_sequences_jsonl([record], path)
    assert load_sequences_jsonl(path) == [s]
    rows = turn_rows([record])
    assert [r["policy_version"] for r in rows] == [1, 1, 2]
    steps = record.steps  # each turn: handed over as its prompt's step ended, answered as its step began
    assert [(r["requested_at"], r["answered_at"]) for r in rows] == [
        (steps[k - 1].ended_at, steps[k].started_at) for k in (1, 2, 3)
    ]
    assert [(c.start, c.end, c.policy_version, c.requested_at) for c in s.turn_calls] == [
        (0, 2, 1, None), (3, 4, 1, None), (6, 8, 2, None),
    ]  # fmt: skip  # no runner recorded these calls: spans and versions, no clock


def test_the_runners_calls_reach_turn_rows_and_sequences_and_round_trip(tmp_path: Path) -> None:
    """A call asked of version 1 and answered by version 2 after queueing 2 s: the turn row and the
    sequence's ``turn_calls`` say so, through the JSONL records and the sequences file."""
    turns = [
        (request([1, 2]), replace(response([10, 11], [-0.1, -0.2]), policy_version=1)),
        (request([1, 2, 10, 11, 20]), replace(response([12], [-0.3]), policy_version=2)),
    ]
    calls = {1: PolicyCall(100.0, 100.5, 101.0, 1), 2: PolicyCall(102.0, 104.0, 105.0, 1)}
    plain = episode(turns)
    steps = [
        StepRecord(
            s.index, s.step_type, s.observation, s.action, s.reward, s.discount, s.started_at, s.ended_at,
            s.trace, calls.get(s.index),
        )
        for s in plain.steps
    ]  # fmt: skip
    record = replace(plain, steps=type(plain.steps)(steps))
    reloaded = EpisodeRecord.from_json(json.loads(json.dumps(record.to_json())))
    assert [s.call for s in reloaded.steps] == [None, calls[1], calls[2]]
    rows = turn_rows([reloaded])
    assert [(r["requested_version"], r["policy_version"], r["queue_s"]) for r in rows] == [
        (1, 1, 0.5),
        (1, 2, 2.0),
    ]
    assert [(r["requested_at"], r["answered_at"]) for r in rows] == [(100.0, 101.0), (102.0, 105.0)]
    (s,) = token_sequences(reloaded)
    assert s.turn_calls == (
        TurnCall(0, 2, 1, 1, 100.0, 101.0, 0.5),
        TurnCall(3, 4, 2, 1, 102.0, 105.0, 2.0),
    )
    path = tmp_path / "sequences.jsonl"
    write_sequences_jsonl([reloaded], path)
    assert load_sequences_jsonl(path) == [s]


def test_an_answer_continued_across_an_update_splits_its_segments_and_survives_the_records(
    tmp_path: Path,
) -> None:
    """A second answer whose first two tokens version 1 sampled before a preemption and whose rest
    version 2 sampled after it: the sequence's segments split inside that answer, the split
    survives the wire and the JSONL, and the staleness bound reads its oldest version."""
    from ares.llm.token_versions import VERSION_SEGMENTS_KEY, oldest_version
    from ares.records.model import decode_value, encode_value

    continued = replace(
        response([12, 13, 14], [-0.3, -0.4, -0.5]), policy_version=2,
        extra={VERSION_SEGMENTS_KEY: [[0, 2, 1], [2, 3, 2]]},
    )  # fmt: skip
    assert decode_value(encode_value(continued)) == continued  # as the records keep it
    wire = openai_chat.response_to_openai(continued)
    assert openai_chat.response_from_openai(wire).extra == continued.extra
    assert oldest_version(continued) == 1 and oldest_version(ANSWER) == 7
    turns = [
        (request([1, 2]), replace(response([10, 11], [-0.1, -0.2]), policy_version=1)),
        (request([1, 2, 10, 11, 20]), continued),
    ]
    (s,) = token_sequences(episode(turns))
    assert s.completion_ids == (10, 11, 20, 12, 13, 14)
    assert s.version_segments == ((0, 5, 1), (5, 6, 2))  # version 1 up to the preemption, then 2
    path = tmp_path / "sequences.jsonl"
    write_sequences_jsonl([episode(turns)], path)
    assert load_sequences_jsonl(path) == [s]
