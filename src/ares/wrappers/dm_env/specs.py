"""dm_env specs for LLM I/O: what an observation or action of ``AresDmEnv`` may be.

dm_env describes every value with an ``Array`` spec. An LLM request or response is not a numeric
array, so each spec here is an ``Array`` of shape ``()`` and dtype ``object`` (a scalar holding one
Python object, like the elements of dm_env's own ``StringArray``) whose ``validate()`` checks what
that object is. As dm_env asks, ``validate()`` returns the value as a numpy array (0-d, dtype object;
``.item()`` gives the object back) and raises ``ValueError`` naming the spec; ``generate_value()``
returns the spec's ``example``, a valid instance, so generic dm_env tooling (such as
``dm_env.test_utils``) can make well-formed observations and actions.
"""

from __future__ import annotations

import abc
import copy
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from dm_env import specs

from ares.errors import LLMError
from ares.llm.openai_chat import request_from_openai
from ares.llm.types import LLMRequest, LLMResponse, Message, ToolCall, user
from ares.wrappers.wellformed import request_ok, response_ok

_DEFAULT_REQUEST = LLMRequest(messages=(user("Say hello."),))


def object_scalar(item: object) -> np.ndarray:
    """A 0-d object array holding ``item`` as is (``np.asarray`` would unpack lists and tuples)."""
    array = np.empty((), dtype=object)
    array[()] = item
    return array


def _type_name(value: object) -> str:
    return "None" if value is None else type(value).__qualname__


class ObjectSpec(specs.Array, metaclass=abc.ABCMeta):
    """A scalar object spec; subclasses say which objects are valid in ``_problem``.

    ``optional=True`` also accepts None (an observation that does not exist, e.g. at LAST).
    """

    __slots__ = ("_example", "_optional")

    def __init__(self, example: Any, optional: bool = False, name: str | None = None) -> None:
        super().__init__(shape=(), dtype=object, name=name)
        self._optional = optional
        if (problem := self._problem(example)) is not None:
            raise ValueError(f"the example of {type(self).__name__} is not valid: {problem}")
        self._example = example

    @property
    def example(self) -> Any:
        """The value ``generate_value()`` returns."""
        return self._example

    @property
    def optional(self) -> bool:
        return self._optional

    def validate(self, value: Any) -> np.ndarray:
        """``value`` (or a 0-d object array holding it) as a 0-d object array; ValueError if invalid."""
        if isinstance(value, np.ndarray):
            if value.shape != ():
                self._fail_validation("Expected a scalar (shape ()) but found shape %r", value.shape)
            value = value.item()
        if value is None and self._optional:
            return object_scalar(None)
        if (problem := self._problem(value)) is not None:
            self._fail_validation("%s", problem)
        return object_scalar(value)

    def generate_value(self) -> Any:
        return self._example

    @abc.abstractmethod
    def _problem(self, item: object) -> str | None:
        """Why ``item`` is not valid, or None if it is."""

    def __eq__(self, other: object) -> bool:
        """Same kind of value; like dm_env's specs, the name and example do not matter."""
        return (
            type(other) is type(self) and isinstance(other, ObjectSpec) and self._optional == other._optional
        )

    __hash__ = None  # type: ignore[assignment]  # unhashable, like dm_env's specs

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, optional={self._optional})"

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self._example, self._optional, self.name)


class LLMRequestSpec(ObjectSpec):
    """An ``ares.LLMRequest``: the code agent's request to its model (the "object" observation)."""

    __slots__ = ()

    def __init__(
        self, example: LLMRequest = _DEFAULT_REQUEST, optional: bool = False, name: str | None = None
    ) -> None:
        super().__init__(example, optional, name)

    def _problem(self, item: object) -> str | None:
        if not isinstance(item, LLMRequest):
            return f"Expected an ares.LLMRequest but found {_type_name(item)}"
        if not all(isinstance(m, Message) for m in item.messages):
            return "Expected LLMRequest.messages to hold only ares.Message values"
        if not request_ok(item):
            return "Expected a well-formed ares.LLMRequest, but a field has the wrong type or range"
        return None


class LLMResponseSpec(ObjectSpec):
    """An ``ares.LLMResponse``: the policy's answer (the "object" action)."""

    __slots__ = ()

    def __init__(
        self,
        example: LLMResponse = LLMResponse(content=""),  # noqa: B008  (frozen, so safe to share)
        optional: bool = False,
        name: str | None = None,
    ) -> None:
        super().__init__(example, optional, name)

    def _problem(self, item: object) -> str | None:
        if isinstance(item, str):
            return (
                "Expected an ares.LLMResponse but found str: wrap the text with "
                "ares.llm.text_response(text), or create the environment with action='text'"
            )
        if not isinstance(item, LLMResponse):
            return f"Expected an ares.LLMResponse but found {_type_name(item)}"
        if item.content is not None and not isinstance(item.content, str):
            return f"Expected LLMResponse.content to be a str or None but found {_type_name(item.content)}"
        if not all(isinstance(call, ToolCall) for call in item.tool_calls):
            return "Expected LLMResponse.tool_calls to hold only ares.ToolCall values"
        if not response_ok(item):
            return "Expected a well-formed ares.LLMResponse, but a field has the wrong type or range"
        return None


class ChatMessagesSpec(ObjectSpec):
    """A conversation in OpenAI chat wire form: a list of ``{"role": ..., "content": ...}`` dicts.

    The list sits inside a 0-d object array, since dm_env would take a bare list for a nest of values.
    """

    __slots__ = ()

    def __init__(
        self,
        example: Sequence[Mapping[str, Any]] = ({"role": "user", "content": "Say hello."},),
        optional: bool = False,
        name: str | None = None,
    ) -> None:
        super().__init__(copy.deepcopy(list(example)), optional, name)

    def _problem(self, item: object) -> str | None:
        if not isinstance(item, list | tuple):
            return f"Expected a list of OpenAI chat messages but found {_type_name(item)}"
        try:
            request_from_openai({"messages": list(item)})
        except LLMError as error:
            return f"Expected a list of OpenAI chat messages: {error}"
        return None

    def generate_value(self) -> list[Mapping[str, Any]]:
        return copy.deepcopy(self._example)  # a fresh list each time: lists and dicts are mutable


class TextSpec(specs.StringArray):
    """A plain ``str`` reply (the "text" action); the environment wraps it in an ``LLMResponse``."""

    __slots__ = ("_example",)

    def __init__(self, example: str = "", name: str | None = None) -> None:
        super().__init__(shape=(), string_type=str, name=name)
        if not isinstance(example, str):
            raise ValueError(f"the example of TextSpec must be a str, got {_type_name(example)}")
        self._example = example

    @property
    def example(self) -> str:
        return self._example

    def validate(self, value: Any) -> np.ndarray:
        if isinstance(value, LLMResponse):
            self._fail_validation(
                "Expected a str but found an ares.LLMResponse: pass its content, or create the "
                "environment with action='object'"
            )
        return super().validate(value)

    def generate_value(self) -> str:
        return self._example

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self)  # a StringArray's equality would match any object Array

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"TextSpec(name={self.name!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self._example, self.name)
