"""Lossless conversion between ARES LLM values and the OpenAI Chat Completions wire format.

Wire values are plain JSON dicts, as sent over HTTP. The conversions are exact inverses so recorded
traffic can be replayed and re-parsed without drift: a wire key we do not model, or one spelled
differently from how we would render it (``stop`` as a bare string, ``tools: []``,
``content: null``...), is kept verbatim in the nearest ``extra`` and written back as it was.

ARES extension keys (``strip_extensions`` removes the request ones before a real provider sees them):

- request ``ares_prompt_token_ids``: ``LLMRequest.prompt_token_ids``
- request ``ares_metadata``: ``LLMRequest.metadata``
- request ``ares_no_system_prompt: true``: the first message is a system message that is *not*
  ``system_prompt``; emitted only in that otherwise ambiguous case
- response ``ares_cost``: ``LLMResponse.cost``
- response ``choices[0].token_ids``: ``LLMResponse.token_ids`` (vLLM's ``return_token_ids`` key)

Reserved ``LLMResponse.extra`` keys: ``ares_choice`` and ``ares_message`` hold the keys of
``choices[0]`` and of its message that the fields alone would not reproduce; ``ares_more_choices``
holds ``choices[1:]``. A missing response ``id``/``model`` is written as ``""`` and ``""`` reads back
as None, because clients with strict schemas reject ``null`` there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, cast, get_args

from ares.errors import LLMError, MalformedResponseError
from ares.llm import codec_core as core
from ares.llm._wire import (
    COST_KEY,
    Bad,
    Json,
    check,
    listed,
    member,
    merge,
    obj,
    objects,
    opt_id,
    opt_int,
    opt_ints,
    opt_num,
    opt_str,
    residual,
    seq,
    some,
)
from ares.llm._wire import METADATA_KEY as METADATA_KEY  # re-exported: part of this API
from ares.llm._wire import PROMPT_TOKEN_IDS_KEY as PROMPT_TOKEN_IDS_KEY
from ares.llm._wire import strip_extensions as strip_extensions
from ares.llm.codec_core import POLICY_VERSION_KEY
from ares.llm.types import LLMRequest, LLMResponse, Message, Role, ToolCall, Usage

NO_SYSTEM_PROMPT_KEY = "ares_no_system_prompt"
TOKEN_IDS_KEY = "token_ids"
CHOICE_EXTRA_KEY = "ares_choice"
MESSAGE_EXTRA_KEY = "ares_message"
MORE_CHOICES_KEY = "ares_more_choices"
_RESERVED_RESPONSE_EXTRA = frozenset({CHOICE_EXTRA_KEY, MESSAGE_EXTRA_KEY, MORE_CHOICES_KEY})

#: Top-level request keys that are sampling controls; unmodelled ones go to SamplingParams.extra.
SAMPLING_KEYS = frozenset(
    {
        "temperature", "top_p", "max_tokens", "stop", "seed", "max_completion_tokens", "n",
        "frequency_penalty", "presence_penalty", "logit_bias", "logprobs", "top_logprobs",
        "top_k", "min_p", "repetition_penalty", "min_tokens",
    }
)  # fmt: skip
_ROLES = frozenset(get_args(Role))


def _merge(extra: Mapping[str, Any], rendered: Json) -> Json:
    return merge(extra, rendered, _PARSERS)


# --- messages and tool calls ------------------------------------------------------------------


def _content(v: object, where: str = "content") -> str | tuple[Mapping[str, Any], ...] | None:
    return v if v is None or isinstance(v, str) else objects(v, where)


def _tool_calls(v: object, where: str = "tool_calls") -> tuple[ToolCall, ...]:
    calls = []
    for i, raw in enumerate(() if v is None else seq(v, where)):
        at = f"{where}[{i}]"
        call = obj(raw, at)
        fn = obj(call.get("function"), f"{at}.function")
        calls.append(
            ToolCall(
                id=check(call.get("id"), f"{at}.id", "a string"),
                name=check(fn.get("name"), f"{at}.function.name", "a string"),
                arguments=check(fn.get("arguments"), f"{at}.function.arguments", "a string"),
                type=check(call.get("type", "function"), f"{at}.type", "a string"),
            )
        )
    return tuple(calls)


def _tool_calls_wire(calls: tuple[ToolCall, ...]) -> list[Json] | None:
    wire = [
        {"id": c.id, "type": c.type, "function": {"name": c.name, "arguments": c.arguments}} for c in calls
    ]
    return wire or None


def _message_fields(m: Message) -> Json:
    content = m.content if m.content is None or isinstance(m.content, str) else [dict(p) for p in m.content]
    fields = {"role": m.role, "content": content, "tool_calls": _tool_calls_wire(m.tool_calls)}
    return some({**fields, "tool_call_id": m.tool_call_id, "name": m.name})


def message_to_openai(m: Message) -> Json:
    """One chat message in wire form."""
    return _merge(m.extra, _message_fields(m))


def _message(raw: object, where: str) -> Message:
    m = obj(raw, where)
    msg = Message(
        role=cast(Role, member(m.get("role"), f"{where}.role", _ROLES)),
        content=_content(m.get("content"), f"{where}.content"),
        tool_calls=_tool_calls(m.get("tool_calls"), f"{where}.tool_calls"),
        tool_call_id=opt_str(m.get("tool_call_id"), f"{where}.tool_call_id"),
        name=opt_str(m.get("name"), f"{where}.name"),
    )
    extra = residual(m, _message_fields(msg))
    return replace(msg, extra=extra) if extra else msg


# --- requests ---------------------------------------------------------------------------------


def _is_plain_system(m: Message) -> bool:
    """Whether ``m`` is exactly what a ``system_prompt`` renders to (so it can be absorbed)."""
    plain = not (m.tool_calls or m.extra) and m.tool_call_id is None and m.name is None
    return plain and m.role == "system" and isinstance(m.content, str)


def _stop(v: object, where: str = "stop") -> tuple[str, ...] | None:
    if v is None or isinstance(v, str):
        return None if v is None else (v,)
    return tuple(check(x, f"{where}[{i}]", "a string") for i, x in enumerate(seq(v, where)))


def _tools(v: object, where: str = "tools") -> tuple[Mapping[str, Any], ...]:
    return () if v is None else objects(v, where)


_KEYS = core.RequestKeys(
    SAMPLING_KEYS, order=("temperature", "top_p", "max_tokens", "seed", "stop"), read_stop=_stop
)


def _flag(v: object, where: str = NO_SYSTEM_PROMPT_KEY) -> bool:
    return bool(check(v, where, "a boolean", null=True))


def _request_fields(req: LLMRequest, render: Callable[[Message], Json] | None = None) -> Json:
    head = [{"role": "system", "content": req.system_prompt}] if req.system_prompt is not None else []
    ambiguous = req.system_prompt is None and bool(req.messages) and _is_plain_system(req.messages[0])
    messages = [*head, *map(render or message_to_openai, req.messages)]
    tools = {"tools": [dict(t) for t in req.tools] or None}
    fields = core.request_fields(req, _KEYS, {"messages": messages, "model": req.model}, tools)
    return {**fields, **some({NO_SYSTEM_PROMPT_KEY: ambiguous or None})}


def request_to_openai(req: LLMRequest, *, render_message: Callable[[Message], Json] | None = None) -> Json:
    """The JSON body of ``POST /chat/completions`` for ``req`` (with ARES extension keys).

    ``render_message`` replaces ``message_to_openai`` for each message, e.g. with a cache: messages
    are immutable and consecutive requests of an episode share most of them.
    """
    return core.request_wire(req, lambda r: _request_fields(r, render_message), _PARSERS)


@core.reports(LLMError, "malformed OpenAI chat completion request")
def request_from_openai(body: Mapping[str, Any]) -> LLMRequest:
    """The LLMRequest a chat completion body stands for; raises ``LLMError`` if it is malformed."""
    b = obj(body, "the body")
    msgs = [_message(m, f"messages[{i}]") for i, m in enumerate(seq(b.get("messages"), "messages"))]
    system_prompt = None
    if msgs and not _flag(b.get(NO_SYSTEM_PROMPT_KEY)) and _is_plain_system(msgs[0]):
        system_prompt, msgs = cast(str, msgs[0].content), msgs[1:]
    tools = _tools(b.get("tools"))
    return core.read_request(
        b, _KEYS, _request_fields, messages=msgs, system_prompt=system_prompt, tools=tools, skip="messages"
    )


# --- responses --------------------------------------------------------------------------------


def _logprobs(v: object, where: str = "logprobs") -> tuple[float, ...] | None:
    content = None if v is None else obj(v, where).get("content")
    return None if content is None else tuple(core.logprob_values(content, f"{where}.content"))


def _logprobs_wire(logprobs: tuple[float, ...] | None) -> Json | None:
    if logprobs is None:
        return None
    entries = [{"token": "", "logprob": lp, "bytes": None, "top_logprobs": []} for lp in logprobs]
    return {"content": entries, "refusal": None}


def _usage(v: object, where: str = "usage") -> Usage | None:
    if v is None:
        return None
    u = obj(v, where)
    usage = Usage(
        prompt_tokens=opt_int(u.get("prompt_tokens"), f"{where}.prompt_tokens") or 0,
        completion_tokens=opt_int(u.get("completion_tokens"), f"{where}.completion_tokens") or 0,
    )
    extra = residual(u, _usage_fields(usage))
    return replace(usage, extra=extra) if extra else usage


def _usage_fields(u: Usage) -> Json:
    p, c = u.prompt_tokens, u.completion_tokens
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": u.total_tokens}


def usage_to_openai(u: Usage) -> Json:
    """The ``usage`` object; ``total_tokens`` is computed unless ``extra`` records the provider's own."""
    return _merge(u.extra, _usage_fields(u))


_id = opt_id


def _response_fields(r: LLMResponse) -> tuple[Json, Json, Json]:
    """The top-level object (without choices), the first choice and its message, as rendered."""
    message = {
        "role": "assistant",
        "content": r.content,
        **some({"tool_calls": _tool_calls_wire(r.tool_calls)}),
    }
    choice = {"index": 0, "message": message, "logprobs": _logprobs_wire(r.logprobs)}
    choice.update(finish_reason=r.finish_reason, **some({TOKEN_IDS_KEY: listed(r.token_ids)}))
    top = {"id": r.id or "", "object": "chat.completion", "created": 0, "model": r.model or "", "choices": []}
    usage = None if r.usage is None else usage_to_openai(r.usage)
    extensions = {"usage": usage, COST_KEY: r.cost, POLICY_VERSION_KEY: r.policy_version}
    return {**top, **some(extensions)}, choice, message


#: How to read each modelled wire key, to tell a re-spelling kept in ``extra`` from a stale value.
# fmt: off
_PARSERS: Mapping[str, Callable[[Any], Any]] = {
    "model": _id, "tools": _tools, **_KEYS.parsers(), NO_SYSTEM_PROMPT_KEY: _flag, "content": _content,
    "tool_calls": _tool_calls, "tool_call_id": opt_str, "name": opt_str, "id": _id, "usage": _usage,
    COST_KEY: opt_num, "logprobs": _logprobs, "finish_reason": opt_str, TOKEN_IDS_KEY: opt_ints,
    "prompt_tokens": opt_int, "completion_tokens": opt_int, POLICY_VERSION_KEY: opt_int,
}
# fmt: on


def response_to_openai(resp: LLMResponse) -> Json:
    """A full ``chat.completion`` object with ``resp`` as its single (first) choice."""
    ex = resp.extra
    top, choice, message = _response_fields(resp)
    choice["message"] = _merge(ex.get(MESSAGE_EXTRA_KEY, {}), message)
    top["choices"] = [_merge(ex.get(CHOICE_EXTRA_KEY, {}), choice), *ex.get(MORE_CHOICES_KEY, ())]
    return _merge({k: v for k, v in ex.items() if k not in _RESERVED_RESPONSE_EXTRA}, top)


@core.reports(MalformedResponseError, "malformed OpenAI chat completion response")
def response_from_openai(body: object) -> LLMResponse:
    """The first choice of a ``chat.completion`` body; raises ``MalformedResponseError`` if malformed."""
    b = obj(body, "the body")
    if "choices" not in b and "error" in b:
        raise core.error_body(b, "a completion")
    choices = seq(b.get("choices"), "choices")
    if not choices:
        raise Bad("choices is empty; expected at least one choice")
    c = obj(choices[0], "choices[0]")
    m = obj(c.get("message"), "choices[0].message")
    resp = LLMResponse(
        content=opt_str(m.get("content"), "choices[0].message.content"),
        tool_calls=_tool_calls(m.get("tool_calls"), "choices[0].message.tool_calls"),
        finish_reason=opt_str(c.get("finish_reason"), "choices[0].finish_reason"),
        usage=_usage(b.get("usage")),
        cost=opt_num(b.get(COST_KEY), COST_KEY),
        model=_id(b.get("model"), "model"),
        id=_id(b.get("id")),
        token_ids=opt_ints(c.get(TOKEN_IDS_KEY), f"choices[0].{TOKEN_IDS_KEY}"),
        logprobs=_logprobs(c.get("logprobs"), "choices[0].logprobs"),
        policy_version=opt_int(b.get(POLICY_VERSION_KEY), POLICY_VERSION_KEY),
    )
    top, choice, message = _response_fields(resp)
    extra = residual(b, top, skip="choices")
    if choice_extra := residual(c, choice, skip="message"):
        extra[CHOICE_EXTRA_KEY] = choice_extra
    if message_extra := residual(m, message):
        extra[MESSAGE_EXTRA_KEY] = message_extra
    if len(choices) > 1:
        extra[MORE_CHOICES_KEY] = list(choices[1:])
    return replace(resp, extra=extra) if extra else resp
