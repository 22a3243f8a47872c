"""Gymnasium spaces for LLM observations and actions.

An ARES observation is a structured ``LLMRequest`` and an action an ``LLMResponse``: neither is an
array, but generic tooling (``check_env``, vector batching, ``action_space.sample()`` for smoke tests)
still needs a real ``Space`` that can seed, sample and test membership. Membership means *well
formed* (the right types in every field), never *short*: ``max_messages``/``max_length`` only bound
what ``sample()`` draws. Spaces compare equal when their classes and sampling bounds match, so
``batch_space`` (which deep-copies custom spaces into a ``Tuple``) and pickling work unchanged.

Token ids use gymnasium's own ``Sequence(Discrete(vocab), stack=True)`` (see ``token_ids_space``).
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from typing import Any, Generic, TypeVar

import numpy as np
from gymnasium.spaces import Discrete, Space
from gymnasium.spaces import Sequence as SequenceSpace

from ares.llm.openai_chat import (
    request_from_openai,
    request_to_openai,
    response_from_openai,
    response_to_openai,
)
from ares.llm.types import LLMRequest, LLMResponse, Message, Role
from ares.wrappers.wellformed import chat_messages_ok, request_ok, response_ok

T = TypeVar("T")
#: Largest id a token space allows when no tokenizer says how big the vocabulary is.
UNKNOWN_VOCAB_SIZE = int(np.iinfo(np.int32).max)
_ALPHABET = string.ascii_letters + string.digits + string.punctuation + " \n"


class _LLMSpace(Space[T], Generic[T]):
    """Shared machinery: no shape or dtype, sampling bounds as the only parameters."""

    def __init__(self, *, max_messages: int, max_length: int, seed: int | np.random.Generator | None) -> None:
        if max_messages < 1 or max_length < 0:
            raise ValueError(f"need max_messages >= 1 and max_length >= 0, got {max_messages}, {max_length}")
        self.max_messages = max_messages
        self.max_length = max_length
        super().__init__(None, None, seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def _params(self) -> tuple[int, ...]:
        return (self.max_messages, self.max_length)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._params() == self._params()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, *self._params()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(max_messages={self.max_messages}, max_length={self.max_length})"

    @staticmethod
    def _no_masks(mask: Any, probability: Any) -> None:
        if mask is not None or probability is not None:
            raise ValueError("LLM spaces do not support sampling masks or probabilities")

    def _text(self) -> str:
        n = int(self.np_random.integers(0, self.max_length + 1))
        return "".join(_ALPHABET[i] for i in self.np_random.integers(0, len(_ALPHABET), size=n))

    def _conversation(self) -> list[Message]:
        """1..max_messages turns alternating user/assistant, starting with the user."""
        count = int(self.np_random.integers(1, self.max_messages + 1))
        roles: tuple[Role, Role] = ("user", "assistant")
        return [Message(roles[i % 2], self._text()) for i in range(count)]


class LLMRequestSpace(_LLMSpace[LLMRequest]):
    """Every well-formed ``LLMRequest``; samples are short random conversations with a system prompt."""

    def __init__(
        self, *, max_messages: int = 6, max_length: int = 120, seed: int | np.random.Generator | None = None
    ) -> None:
        super().__init__(max_messages=max_messages, max_length=max_length, seed=seed)

    def contains(self, x: Any) -> bool:
        return request_ok(x)

    def sample(self, mask: Any | None = None, probability: Any | None = None) -> LLMRequest:
        self._no_masks(mask, probability)
        system_prompt = self._text()
        return LLMRequest(messages=tuple(self._conversation()), system_prompt=system_prompt)

    def to_jsonable(self, sample_n: Sequence[LLMRequest]) -> list[dict[str, Any]]:
        return [request_to_openai(r) for r in sample_n]

    def from_jsonable(self, sample_n: list[Any]) -> list[LLMRequest]:
        return [request_from_openai(body) for body in sample_n]


class LLMResponseSpace(_LLMSpace[LLMResponse]):
    """Every well-formed ``LLMResponse``; samples are random text replies that finished with "stop"."""

    def __init__(self, *, max_length: int = 120, seed: int | np.random.Generator | None = None) -> None:
        super().__init__(max_messages=1, max_length=max_length, seed=seed)

    def __repr__(self) -> str:
        return f"LLMResponseSpace(max_length={self.max_length})"

    def contains(self, x: Any) -> bool:
        return response_ok(x)

    def sample(self, mask: Any | None = None, probability: Any | None = None) -> LLMResponse:
        self._no_masks(mask, probability)
        return LLMResponse(content=self._text(), finish_reason="stop")

    def to_jsonable(self, sample_n: Sequence[LLMResponse]) -> list[dict[str, Any]]:
        return [response_to_openai(r) for r in sample_n]

    def from_jsonable(self, sample_n: list[Any]) -> list[LLMResponse]:
        return [response_from_openai(body) for body in sample_n]


class ChatMessagesSpace(_LLMSpace[list[dict[str, Any]]]):
    """Non-empty lists of OpenAI chat message dicts, system prompt included as the first message."""

    def __init__(
        self, *, max_messages: int = 6, max_length: int = 120, seed: int | np.random.Generator | None = None
    ) -> None:
        super().__init__(max_messages=max_messages, max_length=max_length, seed=seed)

    def contains(self, x: Any) -> bool:
        return chat_messages_ok(x)

    def sample(self, mask: Any | None = None, probability: Any | None = None) -> list[dict[str, Any]]:
        self._no_masks(mask, probability)
        system = {"role": "system", "content": self._text()}
        return [system, *({"role": m.role, "content": m.content} for m in self._conversation())]


class TextSpace(_LLMSpace[str]):
    """Any ``str`` (the assistant's reply); samples are random printable text."""

    def __init__(self, *, max_length: int = 120, seed: int | np.random.Generator | None = None) -> None:
        super().__init__(max_messages=1, max_length=max_length, seed=seed)

    def __repr__(self) -> str:
        return f"TextSpace(max_length={self.max_length})"

    def contains(self, x: Any) -> bool:
        return isinstance(x, str)

    def sample(self, mask: Any | None = None, probability: Any | None = None) -> str:
        self._no_masks(mask, probability)
        return self._text()


def token_ids_space(vocab_size: int, seed: int | np.random.Generator | None = None) -> SequenceSpace:
    """1-D int64 arrays of ids in ``[0, vocab_size)``: gymnasium's ``Sequence(Discrete(n), stack=True)``."""
    if vocab_size < 1:
        raise ValueError(f"vocab_size must be >= 1, got {vocab_size}")
    return SequenceSpace(Discrete(vocab_size), stack=True, seed=seed)
