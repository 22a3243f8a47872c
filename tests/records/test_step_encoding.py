"""Step records as JSON: the writer's spliced text equals the plain encoding; traces are lazy."""

from __future__ import annotations

import json
from typing import Any

from ares.core.timestep import StepType, TimeStep
from ares.envs.command_log import CommandRecord
from ares.llm.types import LLMRequest, LLMResponse, user
from ares.records import NullCollector, TrajectoryCollectingEnvironment
from ares.records.encoding import JsonFragments, dumps, step_json_text
from ares.records.model import StepRecord
from ares.records.rollout_trace import StepTrace
from ares.sandbox.base import ExecResult

REQUEST = LLMRequest(messages=(user("list files"),), system_prompt="be brief", prompt_token_ids=(1, 2))
RESPONSE = LLMResponse(content="ls", token_ids=(5, 6), logprobs=(-0.1, -0.2))
COMMAND = CommandRecord("ls", "/app", ExecResult("a\nb\n", "", 0, False, 0.01))


def traced_step(index: int, level: str = "full") -> StepRecord:
    trace = StepTrace(level, REQUEST, RESPONSE, 1.0, 0.0, {"tests": 1}, [COMMAND])
    return StepRecord(index, "LAST", REQUEST, RESPONSE, 1.0, 0.0, 10.0, 10.5, trace)


def same_record(text: str, step: StepRecord) -> bool:
    """The writer's text loads as the record the plain encoding loads as."""
    plain = json.loads(json.dumps(step.to_json()))
    return StepRecord.from_json(json.loads(text)) == StepRecord.from_json(plain)


def test_spliced_text_is_the_plain_encoding() -> None:
    fragments = JsonFragments()
    for index in range(3):  # later steps reuse the cached request/response text
        step = traced_step(index)
        assert same_record(step_json_text(step, fragments), step)
    stored = json.loads(step_json_text(traced_step(0), fragments))["trace"]
    assert stored["prompt_from"] == "observation" and stored["response_from"] == "action"  # not stored twice
    plain = StepRecord(0, "FIRST", {"grid": [1, 2]}, None, None, None, 1.0, 1.0, {"level": "basic"})
    assert json.loads(step_json_text(plain, fragments)) == plain.to_json()


def test_spliced_text_loads_back_as_an_equal_record() -> None:
    step = traced_step(0)
    loaded = StepRecord.from_json(json.loads(step_json_text(step, JsonFragments())))
    assert loaded.observation == REQUEST and loaded.action == RESPONSE
    assert loaded.trace == dict(step.trace)  # the lazy trace renders to what is stored


def test_trace_is_a_read_only_mapping_rendered_on_demand() -> None:
    trace = StepTrace("basic", REQUEST, RESPONSE, None, 1.0, None, [COMMAND])
    assert list(trace) == ["level", "prompt", "response", "reward", "env_state", "extra"]
    system, task = trace["prompt"]
    assert system == {"role": "system", "content": "be brief"}
    assert task == {"role": "user", "content": "list files"}
    assert trace["response"]["content"] == "ls"
    assert trace["reward"] == {"reward": None, "discount": 1.0, "terms": {}}
    (command,) = trace["env_state"]["commands"]
    assert command["exit_code"] == 0 and "stdout" not in command  # outputs only at "full"


def test_fragments_are_keyed_by_identity_not_equality() -> None:
    fragments = JsonFragments(size=2)
    a, b = [1], [1]
    assert fragments.text("v", a, lambda v: {"n": len(v)}) == fragments.text("v", b, lambda v: {"n": len(v)})
    a.append(2)  # a different object with a cached id must not be served stale text after eviction
    for i in range(3):
        fragments.text("v", [i], lambda v: v)
    assert json.loads(fragments.text("v", a, lambda v: {"n": len(v)})) == {"n": 2}


def test_integers_beyond_64_bits_still_encode() -> None:
    assert json.loads(dumps({"big": 2**70})) == {"big": 2**70}


class MutatingEnv:
    """A non-LLM environment that reuses and mutates one observation list in place."""

    def __init__(self) -> None:
        self.board: list[int] = []

    async def reset(self, *, seed: int | None = None, task: Any | None = None) -> TimeStep[Any]:
        self.board.clear()
        return TimeStep(StepType.FIRST, None, None, self.board)

    async def step(self, action: Any) -> TimeStep[Any]:
        self.board.append(action)
        kind = StepType.LAST if len(self.board) == 3 else StepType.MID
        return TimeStep(kind, 1.0, 0.0 if kind is StepType.LAST else 1.0, self.board)

    async def close(self) -> None:
        pass


class Keep(NullCollector):
    def __init__(self) -> None:
        self.steps: list[StepRecord] = []

    def record_step(self, episode_id: str, step: StepRecord) -> None:
        self.steps.append(step)


async def test_mutable_observations_are_snapshotted_when_recorded() -> None:
    keep = Keep()
    env = TrajectoryCollectingEnvironment(MutatingEnv(), keep, trace="full")  # type: ignore[arg-type]
    await env.reset()
    for move in (7, 8, 9):
        await env.step(move)
    assert [s.observation for s in keep.steps] == [[], [7], [7, 8], [7, 8, 9]]
    assert keep.steps[-1].trace is not None and keep.steps[-1].trace["reward"]["reward"] == 1.0


def test_growing_history_reuses_rendered_messages_and_encodes_the_same() -> None:
    fragments = JsonFragments()
    history = (user("task"),)
    for turn in range(5):
        request = LLMRequest(messages=history, system_prompt="sys")
        step = StepRecord(
            turn,
            "MID",
            request,
            RESPONSE,
            None,
            1.0,
            1.0,
            2.0,
            StepTrace("basic", request, RESPONSE, None, 1.0, None, None),
        )
        assert same_record(step_json_text(step, fragments), step)
        history = (*history, RESPONSE.message(), user(f"output {turn}"))
    assert fragments.message(history[0]) is fragments.message(history[0])  # rendered once, then shared
