"""Episode records: what a trajectory is on disk, in one JSON shape shared by collectors and loaders.

Observations and actions are stored losslessly: an ``LLMRequest``/``LLMResponse`` as its OpenAI Chat
Completions body (with ARES's ``ares_*`` extension keys for fields OpenAI has no place for), tagged
so a loader rebuilds the same object. Anything else is stored as plain JSON.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ares.llm.openai_chat import (
    request_from_openai,
    request_to_openai,
    response_from_openai,
    response_to_openai,
)
from ares.llm.types import LLMRequest, LLMResponse, Message
from ares.records.policy_call import PolicyCall
from ares.records.rollout_trace import StepTrace, prompt_messages, response_message

FORMAT = "ares.trajectory/1"
Json = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ErrorRecord:
    type: str
    message: str
    traceback: str | None = None


@dataclass(frozen=True, slots=True, init=False)
class StepRecord:
    """One environment transition as the agent's LLM saw it.

    ``observation`` is the request the step returned (None on a LAST step without one), ``action`` the
    response that produced it (None for FIRST). ``trace`` is the rollout trace of the step, if traced.
    ``call`` is the policy call that produced ``action``, when a runner recorded it (``PolicyCall``).
    """

    index: int
    step_type: str  # "FIRST" | "MID" | "LAST"
    observation: Any
    action: Any
    reward: float | None
    discount: float | None
    started_at: float
    ended_at: float
    trace: Mapping[str, Any] | None = None
    call: PolicyCall | None = None

    def __init__(
        self,
        index: int,
        step_type: str,
        observation: Any,
        action: Any,
        reward: float | None,
        discount: float | None,
        started_at: float,
        ended_at: float,
        trace: Mapping[str, Any] | None = None,
        call: PolicyCall | None = None,
    ) -> None:
        # Built on every recorded step: the slots are set through their descriptors, which costs
        # half of the generated frozen __init__ (object.__setattr__ per field) and keeps it frozen.
        _set_index(self, index)
        _set_step_type(self, step_type)
        _set_observation(self, observation)
        _set_action(self, action)
        _set_reward(self, reward)
        _set_discount(self, discount)
        _set_started_at(self, started_at)
        _set_ended_at(self, ended_at)
        _set_trace(self, trace)
        _set_call(self, call)

    @property
    def latency_s(self) -> float:
        return self.ended_at - self.started_at

    def to_json(self) -> Json:
        data = {
            "index": self.index,
            "step_type": self.step_type,
            "observation": encode_value(self.observation),
            "action": encode_value(self.action),
            "reward": self.reward,
            "discount": self.discount,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "latency_s": self.latency_s,
            "trace": _trace_json(self.trace),
        }
        if self.call is not None:  # only steps a runner played have one: older records stay as they are
            data["call"] = self.call.to_json()
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any], previous: StepRecord | None = None) -> StepRecord:
        """``previous``: the episode's step before this one (its observation is this step's prompt)."""
        observation = decode_value(data.get("observation"))
        action = decode_value(data.get("action"))
        return cls(
            index=int(data["index"]),
            step_type=str(data["step_type"]),
            observation=observation,
            action=action,
            reward=data.get("reward"),
            discount=data.get("discount"),
            started_at=float(data["started_at"]),
            ended_at=float(data["ended_at"]),
            trace=_resolve_trace(
                data.get("trace"), observation, action, None if previous is None else previous.observation
            ),
            call=PolicyCall.from_json(data.get("call")),
        )


(
    _set_index,
    _set_step_type,
    _set_observation,
    _set_action,
    _set_reward,
    _set_discount,
    _set_started_at,
    _set_ended_at,
    _set_trace,
    _set_call,
) = (vars(StepRecord)[f.name].__set__ for f in dataclasses.fields(StepRecord))


@dataclass(frozen=True, slots=True)
class EpisodeRecord:
    """A whole (or, while running or after a crash, partial) episode."""

    episode_id: str
    task_id: str | None
    seed: int | None
    env: Mapping[str, Any]
    started_at: float
    ended_at: float | None = None
    status: str = "running"
    total_reward: float | None = None
    error: ErrorRecord | None = None
    truncation: str | None = None
    steps: tuple[StepRecord, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def duration_s(self) -> float | None:
        return None if self.ended_at is None else self.ended_at - self.started_at

    def to_json(self) -> Json:
        return {
            "format": FORMAT,
            "episode_id": self.episode_id,
            "task_id": self.task_id,
            "seed": self.seed,
            "env": dict(self.env),
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "duration_s": self.duration_s,
            "status": self.status,
            "total_reward": self.total_reward,
            "error": None if self.error is None else dataclasses.asdict(self.error),
            "truncation": self.truncation,
            "metadata": dict(self.metadata),
            "steps": [s.to_json() for s in self.steps],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> EpisodeRecord:
        if data.get("format") != FORMAT:
            found = data.get("format")
            raise ValueError(f"not an ARES trajectory record (format {found!r}, want {FORMAT!r})")
        error = data.get("error")
        return cls(
            episode_id=str(data["episode_id"]),
            task_id=data.get("task_id"),
            seed=data.get("seed"),
            env=data.get("env") or {},
            started_at=float(data["started_at"]),
            ended_at=data.get("ended_at"),
            status=str(data.get("status", "running")),
            total_reward=data.get("total_reward"),
            error=None if error is None else _error_record(error),
            truncation=data.get("truncation"),
            steps=steps_from_json(data.get("steps", ())),
            metadata=data.get("metadata") or {},
        )


def _error_record(data: Mapping[str, Any]) -> ErrorRecord:
    """An error as stored; keys a later version may add are ignored."""
    return ErrorRecord(str(data.get("type", "")), str(data.get("message", "")), data.get("traceback"))


def steps_from_json(steps: Sequence[Mapping[str, Any]]) -> tuple[StepRecord, ...]:
    """An episode's stored steps, in order, each trace's prompt resolved against the step before."""
    out: list[StepRecord] = []
    for data in steps:
        out.append(StepRecord.from_json(data, out[-1] if out else None))
    return tuple(out)


def _resolve_trace(trace: Json | None, observation: Any, action: Any, previous: Any = None) -> Json | None:
    """A stored trace whose prompt/response point at an observation/action, made whole."""
    if not trace or ("prompt_from" not in trace and "response_from" not in trace):
        return trace
    whole = {k: v for k, v in trace.items() if k not in ("prompt_from", "response_from")}
    if trace.get("prompt_from") == "observation":
        whole["prompt"] = prompt_messages(observation)
    elif trace.get("prompt_from") == "previous_observation":
        whole["prompt"] = prompt_messages(previous)
    if trace.get("response_from") == "action":
        whole["response"] = response_message(action)
    return whole


def _trace_json(trace: Mapping[str, Any] | None) -> Json | None:
    if trace is None:
        return None
    return trace.to_json() if isinstance(trace, StepTrace) else dict(trace)


def encode_value(value: Any, render_message: Callable[[Message], Json] | None = None) -> Any:
    """JSON for an observation/action: LLM types tagged and lossless, the rest made JSON-safe.

    ``render_message`` is passed to ``request_to_openai`` (the writers give a per-message cache)."""
    if value is None:
        return None
    if isinstance(value, LLMRequest):
        return {"kind": "llm_request", "body": request_to_openai(value, render_message=render_message)}
    if isinstance(value, LLMResponse):
        return {"kind": "llm_response", "body": response_to_openai(value)}
    return {"kind": "json", "value": jsonable(value)}


def decode_value(data: Any) -> Any:
    if data is None:
        return None
    kind = data.get("kind")
    if kind == "llm_request":
        return request_from_openai(data["body"])
    if kind == "llm_response":
        return response_from_openai(data["body"])
    return data.get("value")


def jsonable(value: Any) -> Any:
    """Best-effort plain JSON for values that are not LLM types (dataclasses, enums, tuples, ...)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, Sequence | set | frozenset):
        return [jsonable(v) for v in value]
    return repr(value)
