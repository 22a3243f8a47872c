"""Is this LLM value well formed? Field-by-field type checks shared by the adapters: behind the gym
spaces' ``contains()`` and the dm_env specs' ``validate()``.

Only types and ranges are checked, never lengths: a long conversation is still a valid observation.
The action codec uses the same checks, so a malformed action fails before it reaches the agent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import get_args

import numpy as np

from ares.llm.types import LLMRequest, LLMResponse, Message, Role, SamplingParams, ToolCall, Usage

ROLES = frozenset(get_args(Role))


def _opt(value: object, kind: type | tuple[type, ...]) -> bool:
    return value is None or (isinstance(value, kind) and not isinstance(value, bool))


def _opt_number(value: object, low: float = -math.inf, high: float = math.inf) -> bool:
    return value is None or (_opt(value, (int, float)) and low <= value <= high)  # type: ignore[operator]


def _count(value: object, low: int = 0) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def is_token_ids(value: object) -> bool:
    """A tuple of non-negative ints (numpy integers included), as ``prompt_token_ids``/``token_ids``."""
    return isinstance(value, tuple) and all(
        isinstance(t, int | np.integer) and not isinstance(t, bool) and t >= 0 for t in value
    )


def _tool_call_ok(call: object) -> bool:
    return isinstance(call, ToolCall) and all(
        isinstance(v, str) for v in (call.id, call.name, call.arguments, call.type)
    )


def _content_ok(content: object) -> bool:
    if content is None or isinstance(content, str):
        return True
    return isinstance(content, tuple) and all(
        isinstance(p, Mapping) and isinstance(p.get("type"), str) for p in content
    )


def message_ok(m: object) -> bool:
    """Whether ``m`` is a well-formed ``Message`` (tool calls only from the assistant, ids on tool
    replies)."""
    if not isinstance(m, Message) or m.role not in ROLES or not _content_ok(m.content):
        return False
    if not (isinstance(m.tool_calls, tuple) and all(_tool_call_ok(c) for c in m.tool_calls)):
        return False
    if m.tool_calls and m.role != "assistant":
        return False
    if m.role == "tool" and not isinstance(m.tool_call_id, str):
        return False
    return _opt(m.tool_call_id, str) and _opt(m.name, str) and isinstance(m.extra, Mapping)


def _sampling_ok(s: object) -> bool:
    if not isinstance(s, SamplingParams):
        return False
    stop_ok = s.stop is None or (isinstance(s.stop, tuple) and all(isinstance(x, str) for x in s.stop))
    return (
        _opt_number(s.temperature, 0.0)
        and _opt_number(s.top_p, 0.0, 1.0)
        and (s.max_tokens is None or _count(s.max_tokens, 1))
        and _opt(s.seed, int)
        and stop_ok
        and isinstance(s.extra, Mapping)
    )


def request_ok(r: object) -> bool:
    """Whether ``r`` is a well-formed ``LLMRequest`` with at least one message or a system prompt."""
    if not isinstance(r, LLMRequest) or not isinstance(r.messages, tuple):
        return False
    return (
        all(message_ok(m) for m in r.messages)
        and _opt(r.system_prompt, str)
        and (bool(r.messages) or r.system_prompt is not None)
        and isinstance(r.tools, tuple)
        and all(isinstance(t, Mapping) for t in r.tools)
        and _sampling_ok(r.sampling)
        and _opt(r.model, str)
        and (r.prompt_token_ids is None or is_token_ids(r.prompt_token_ids))
        and isinstance(r.metadata, Mapping)
        and isinstance(r.extra, Mapping)
    )


def _usage_ok(u: object) -> bool:
    return u is None or (isinstance(u, Usage) and _count(u.prompt_tokens) and _count(u.completion_tokens))


def response_ok(r: object) -> bool:
    """Whether ``r`` is a well-formed ``LLMResponse`` (one logprob per token id when both are given)."""
    if not isinstance(r, LLMResponse):
        return False
    logprobs_ok = r.logprobs is None or (
        isinstance(r.logprobs, tuple)
        and all(x is not None and _opt_number(x) for x in r.logprobs)
        and (r.token_ids is None or len(r.token_ids) == len(r.logprobs))
    )
    return (
        _opt(r.content, str)
        and isinstance(r.tool_calls, tuple)
        and all(_tool_call_ok(c) for c in r.tool_calls)
        and _opt(r.finish_reason, str)
        and _usage_ok(r.usage)
        and _opt_number(r.cost, 0.0)
        and _opt(r.model, str)
        and _opt(r.id, str)
        and (r.token_ids is None or is_token_ids(r.token_ids))
        and logprobs_ok
        and isinstance(r.extra, Mapping)
    )


def _wire_tool_call_ok(call: object) -> bool:
    if not isinstance(call, Mapping) or not isinstance(call.get("id"), str):
        return False
    fn = call.get("function")
    return (
        isinstance(fn, Mapping) and isinstance(fn.get("name"), str) and isinstance(fn.get("arguments"), str)
    )


def _wire_message_ok(m: object) -> bool:
    """One OpenAI chat message dict: a known role and content of the type that role allows."""
    if not isinstance(m, Mapping) or m.get("role") not in ROLES:
        return False
    role, content = m["role"], m.get("content")
    if isinstance(content, list):
        parts_ok = all(
            isinstance(p, Mapping)
            and isinstance(p.get("type"), str)
            and (p["type"] != "text" or isinstance(p.get("text"), str))
            for p in content
        )
        if not parts_ok:
            return False
    elif not (isinstance(content, str) or (content is None and role == "assistant")):
        return False
    calls = m.get("tool_calls")
    if calls is not None:
        if role != "assistant" or not isinstance(calls, list):
            return False
        if not all(_wire_tool_call_ok(call) for call in calls):
            return False
    if role == "tool" and not isinstance(m.get("tool_call_id"), str):
        return False
    return _opt(m.get("name"), str)


def chat_messages_ok(value: object) -> bool:
    """A non-empty list of OpenAI chat message dicts (``request_to_openai(...)["messages"]``)."""
    return isinstance(value, list) and bool(value) and all(_wire_message_ok(m) for m in value)
