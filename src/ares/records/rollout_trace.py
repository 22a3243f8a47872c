"""Rollout traces, kept as references on the hot path and rendered to JSON only when read.

A step's trace pairs the prompt the policy answered with its answer: for step k >= 1, ``prompt`` is
the observation step k-1 returned and ``response`` the action given to step k (the reset step has
neither). ``extra["policy"]`` holds what that answer cost: latency, tokens, money (when known).

Everything a trace points at is immutable (``LLMRequest``/``LLMResponse``/``Message`` and the
command records are frozen), so holding a reference is as good as a snapshot: the prompt is the one
the policy saw, whatever the environment does with its history afterwards. Rendering (OpenAI
messages, command dicts) happens on first access, normally in a collector's writer thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from ares.llm.openai_chat import message_to_openai, response_to_openai
from ares.llm.types import LLMRequest, LLMResponse, Message

TRACE_KEYS = ("level", "prompt", "response", "reward", "env_state", "extra")


class StepTrace(Mapping[str, Any]):
    """One step's trace: a read-only mapping with the keys of ``TRACE_KEYS``, rendered lazily."""

    __slots__ = (
        "_action", "_commands", "_data", "_discount", "_extra", "_level", "_observation", "_reward", "_terms",
        "previous_observation",
    )  # fmt: skip

    def __init__(
        self,
        level: str,
        observation: Any,
        action: Any,
        reward: float | None,
        discount: float | None,
        terms: Mapping[str, float] | None,
        commands: Sequence[Any] | None,
        extra: Mapping[str, Any] | None = None,
        previous_observation: bool = False,
    ) -> None:
        """``previous_observation``: the prompt is the previous step's observation (the writers then
        store a pointer to it instead of the same request twice)."""
        self._level = level
        self._observation = observation
        self._action = action
        self._reward = reward
        self._discount = discount
        self._terms = terms
        self._commands = commands
        self._extra = extra
        self.previous_observation = previous_observation
        self._data: dict[str, Any] | None = None

    def parts(self) -> tuple[Any, Any, dict[str, Any]]:
        """(observation, action, the trace without prompt/response): for encoders that cache those."""
        env_state: dict[str, Any] = {}
        if self._commands is not None:
            outputs = self._level == "full"
            env_state["commands"] = [c.to_json(outputs=outputs) for c in self._commands]
        rest = {
            "level": self._level,
            "reward": {
                "reward": self._reward,
                "discount": self._discount,
                "terms": {k: float(v) for k, v in (self._terms or {}).items()},
            },
            "env_state": env_state,
            "extra": dict(self._extra or {}),
        }
        return self._observation, self._action, rest

    def _render(self) -> dict[str, Any]:
        data = self._data
        if data is None:
            observation, action, rest = self.parts()
            data = self._data = {
                "prompt": prompt_messages(observation),
                "response": response_message(action),
                **rest,
            }
        return data

    def __getitem__(self, key: str) -> Any:
        return self._render()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(TRACE_KEYS)

    def __len__(self) -> int:
        return len(TRACE_KEYS)

    def to_json(self) -> dict[str, Any]:
        return self._render()

    def __repr__(self) -> str:
        return f"StepTrace({self._render()!r})"


def prompt_messages(
    observation: Any, render_message: Callable[[Message], dict[str, Any]] = message_to_openai
) -> list[dict[str, Any]] | None:
    """The request's conversation as OpenAI messages, the system prompt first."""
    if not isinstance(observation, LLMRequest):
        return None
    messages = [render_message(m) for m in observation.messages]
    if observation.system_prompt:
        messages.insert(0, {"role": "system", "content": observation.system_prompt})
    return messages


def response_message(action: Any) -> dict[str, Any] | None:
    """The response's first choice as an OpenAI assistant message."""
    if not isinstance(action, LLMResponse):
        return None
    choices = response_to_openai(action).get("choices") or [{}]
    return dict(choices[0].get("message") or {})
