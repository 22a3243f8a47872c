"""What the wire-converter tests share: Hypothesis strategies and the round-trip/rejection checks.

The property tests of every converter draw the same neutral values (texts, JSON, ``x_`` extras,
sampling, usage), so these live once here. What a dialect can express differently (its message
roles, content parts, tool shapes, finish reasons, reasoning items) is passed in by that dialect's test.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import pytest
from hypothesis import strategies as st

from ares.llm.types import LLMRequest, LLMResponse, Message, SamplingParams, ToolCall, Usage

T = TypeVar("T")

TEXT = st.text(max_size=8)
OPT_TEXT = st.none() | TEXT
_JSON_SCALAR = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | TEXT
_JSON_SCALAR |= st.floats(allow_nan=False, allow_infinity=False)
JSON = st.recursive(
    _JSON_SCALAR, lambda c: st.lists(c, max_size=3) | st.dictionaries(TEXT, c, max_size=3), max_leaves=6
)
EXTRAS = st.dictionaries(st.text("abcdef_", min_size=1, max_size=5).map("x_".__add__), JSON, max_size=2)
"""Unknown keys (``x_…``) a converter must carry through untouched."""
FLOAT = st.none() | st.floats(allow_nan=False, allow_infinity=False)
INT = st.none() | st.integers(-(2**40), 2**40)
INTS = st.none() | st.lists(st.integers(0, 2**20), max_size=4).map(tuple)
FINISH_REASONS = ("stop", "length", "tool_calls", "content_filter")
OPENAI_TOOL_CALL = st.builds(ToolCall, TEXT, TEXT, TEXT, st.sampled_from(["function", "custom"]))
"""A tool call of either OpenAI kind, with arguments that need not be JSON."""


def optional(required: dict[str, Any], maybe: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """A wire object with every ``required`` key and any subset of the ``maybe`` ones."""
    return st.fixed_dictionaries(required, optional=maybe)


def with_reasoning(items: st.SearchStrategy[dict[str, Any]], key: str) -> st.SearchStrategy[dict[str, Any]]:
    """An assistant ``extra``: plain extras, or extras plus one or two reasoning ``items`` under ``key``."""
    return EXTRAS | st.builds(lambda e, r: {**e, key: r}, EXTRAS, st.lists(items, min_size=1, max_size=2))


def llm_requests(
    *,
    messages: st.SearchStrategy[Message],
    max_messages: int,
    tools: st.SearchStrategy[dict[str, Any]],
    sampling_extra: Sequence[str],
) -> st.SearchStrategy[LLMRequest]:
    """Neutral requests built from a dialect's ``messages`` and ``tools``.

    ``sampling_extra`` names the sampling keys the dialect carries beyond the neutral ones.
    """
    extra = st.dictionaries(st.sampled_from(list(sampling_extra)), JSON)
    return st.builds(
        LLMRequest,
        messages=st.lists(messages, max_size=max_messages).map(tuple),
        system_prompt=OPT_TEXT,
        tools=st.lists(tools, max_size=2).map(tuple),
        sampling=st.builds(
            SamplingParams,
            temperature=FLOAT,
            top_p=FLOAT,
            max_tokens=INT,
            stop=st.none() | st.lists(TEXT, max_size=2).map(tuple),
            seed=INT,
            extra=extra,
        ),
        model=OPT_TEXT,
        prompt_token_ids=INTS,
        metadata=st.dictionaries(TEXT, JSON, max_size=2),
        extra=EXTRAS,
    )


def llm_responses(
    *,
    tool_calls: st.SearchStrategy[ToolCall],
    finish_reasons: Sequence[str] = FINISH_REASONS,
    extra: st.SearchStrategy[dict[str, Any]] = EXTRAS,
) -> st.SearchStrategy[LLMResponse]:
    """Neutral responses with a dialect's ``tool_calls`` and ``extra``.

    ``finish_reasons`` is the vocabulary the dialect maps; any other text is drawn too.
    """
    return st.builds(
        LLMResponse,
        content=OPT_TEXT,
        tool_calls=st.lists(tool_calls, max_size=2).map(tuple),
        finish_reason=st.none() | st.sampled_from(list(finish_reasons)) | TEXT,
        usage=st.none() | st.builds(Usage, st.integers(0, 10**6), st.integers(0, 10**6), EXTRAS),
        cost=FLOAT,
        model=st.none() | st.text(min_size=1, max_size=8),
        id=st.none() | st.text(min_size=1, max_size=8),
        token_ids=INTS,
        logprobs=st.none() | st.lists(st.floats(max_value=0, allow_nan=False), max_size=4).map(tuple),
        extra=extra,
    )


def assert_value_round_trips(
    value: T, render: Callable[[T], dict[str, Any]], parse: Callable[[Any], T]
) -> None:
    """``value`` survives rendering to the wire and parsing back, both directly and through JSON text."""
    assert parse(render(value)) == value
    assert parse(json.loads(json.dumps(render(value)))) == value


def assert_rejects(
    convert: Callable[[Any], object], value: Any, error: type[Exception], what: str, where: str
) -> None:
    """``convert(value)`` raises ``error`` with a message matching ``what`` that names ``where``."""
    with pytest.raises(error, match=what) as info:
        convert(value)
    assert where in str(info.value)
