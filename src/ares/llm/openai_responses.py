"""Lossless conversion between ARES LLM values and the OpenAI Responses API wire format.

Same contract as :mod:`ares.llm.openai_chat`: wire values are plain JSON dicts, the conversions
are exact inverses, and a wire key we do not model (or spell differently from our canonical
rendering) is kept verbatim in the nearest ``extra`` and written back as it was.

Requests (``POST /responses``) read into the neutral shapes every dialect shares:

- ``instructions`` is ``system_prompt``; ``input`` (a string or a list of items) is ``messages``.
- ``input_text`` / ``output_text`` parts read as ``{"type": "text", ...}`` so ``Message.text``
  works as in Chat; they are written back as ``output_text`` in assistant messages and
  ``input_text`` elsewhere (any other spelling comes back from ``extra``).
- A run of assistant-side items, ``reasoning``* then an assistant ``message``? then
  ``function_call`` / ``custom_tool_call``* (Chat ``ToolCall.type`` ``"function"`` / ``"custom"``),
  is one assistant Message. Message ``extra`` keys ``ares_reasoning`` (the reasoning items, verbatim)
  and ``ares_calls`` (per call, the item keys besides ``call_id``/``name``/``arguments``) are reserved.
- ``function_call_output`` / ``custom_tool_call_output`` items are tool Messages.
- Any other item (``item_reference``, built-in tool calls...) is a Message whose ``extra["ares_item"]``
  holds the item, written back verbatim (role ``"tool"`` for ``*_output`` items, else ``"assistant"``).
- Tools: ``{"type": T, **rest}`` reads as ``{"type": T, T: rest}``, which for function tools is
  the Chat shape ``{"type": "function", "function": {"name", "description", "parameters", "strict"}}``.
- ``max_output_tokens`` is ``sampling.max_tokens``.

Rendering a request raises ``LLMError`` for what the API cannot hold: tool calls on a
non-assistant message, a ``ToolCall.type`` other than ``function``/``custom``, a tool not in the
Chat shape above.

Responses (a ``response`` object): the ``output_text`` of message items is ``content``, function
calls are ``tool_calls``, ``output_text.logprobs`` are ``logprobs``, the reasoning items are kept
verbatim in ``LLMResponse.extra["ares_reasoning"]`` (``reasoning_text`` reads their text).
``status`` + ``incomplete_details`` map to ``finish_reason``: ``completed`` -> ``stop`` or
``tool_calls``; ``incomplete`` -> ``length`` (``max_output_tokens``) or ``content_filter``;
``in_progress`` -> None; other statuses pass through. Usage: ``input_tokens`` / ``output_tokens``
are ``prompt_tokens`` / ``completion_tokens``; the details (cached, reasoning tokens) stay in
``Usage.extra``. A missing ``id``/``model``/item id is written as ``""`` and ``""`` reads back as
None (the SDK requires strings there); like openai_chat, the keys a complete object always has
(``created_at``, ``tools``...) are written even when a parsed original lacked them.

ARES extension keys (``strip_extensions`` removes them, including the item-level one):

- request ``ares_prompt_token_ids``, ``ares_metadata``: as in :mod:`ares.llm.openai_chat`
- input item ``ares_new_message: true``: this item starts a new assistant Message; emitted only when
  two assistant Messages in a row would otherwise read back as one
- response ``ares_cost``, ``ares_token_ids``: ``LLMResponse.cost`` / ``token_ids``
- response ``ares_logprobs``: ``LLMResponse.logprobs`` when there is no text to attach them to
- response ``ares_finish_reason``: a finish reason ``status`` cannot express (``stop`` with tool calls...)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, cast

from ares.errors import LLMError, MalformedResponseError
from ares.llm import codec_core as core
from ares.llm._wire import COST_KEY as COST_KEY  # re-exported: the extension keys are part of this API
from ares.llm._wire import METADATA_KEY as METADATA_KEY
from ares.llm._wire import PROMPT_TOKEN_IDS_KEY as PROMPT_TOKEN_IDS_KEY
from ares.llm._wire import (
    Bad,
    Json,
    check,
    each,
    member,
    merge,
    obj,
    objects,
    opt_str,
    own,
    residual,
    some,
    typed_tool,
    typed_tool_wire,
)
from ares.llm.codec_core import FINISH_REASON_KEY, REASONING_KEY
from ares.llm.codec_core import LOGPROBS_KEY as LOGPROBS_KEY
from ares.llm.codec_core import TOKEN_IDS_KEY as TOKEN_IDS_KEY
from ares.llm.types import LLMRequest, LLMResponse, Message, Role, ToolCall, Usage

CALLS_KEY = "ares_calls"
ITEM_KEY = "ares_item"
NEW_MESSAGE_KEY = "ares_new_message"
_RESERVED = frozenset({REASONING_KEY, CALLS_KEY, ITEM_KEY})

#: Top-level request keys that are generation controls; unmodelled ones go to SamplingParams.extra.
SAMPLING_KEYS = frozenset(
    {"temperature", "top_p", "max_output_tokens", "stop", "seed", "top_logprobs", "reasoning"}
)
_KEYS = core.RequestKeys(SAMPLING_KEYS, max_tokens="max_output_tokens")
_MESSAGE_ROLES = frozenset({"system", "developer", "user", "assistant"})
_TEXT_PARTS = frozenset({"input_text", "output_text"})
_CALL_ITEMS = {"function_call": ("function", "arguments"), "custom_tool_call": ("custom", "input")}
_OUTPUT_ITEMS = frozenset({"function_call_output", "custom_tool_call_output"})


def strip_extensions(body: Mapping[str, Any]) -> Json:
    """The request body without ARES extension keys (top level and input items)."""
    out = {k: v for k, v in body.items() if not k.startswith("ares_")}
    if isinstance(items := out.get("input"), list):
        out["input"] = [{k: v for k, v in i.items() if k != NEW_MESSAGE_KEY} for i in items]
    return out


def reasoning_text(resp: LLMResponse) -> str | None:
    """The reasoning a response carries: raw ``reasoning_text`` if given, else the summaries."""
    items = [i for i in resp.extra.get(REASONING_KEY, ()) if isinstance(i, Mapping)]
    if not items:
        return None

    def texts(key: str) -> list[str]:
        return [str(p.get("text", "")) for i in items for p in i.get(key) or () if isinstance(p, Mapping)]

    return "".join(raw) if (raw := texts("content")) else "\n\n".join(texts("summary"))


# --- content parts and tools -----------------------------------------------------------------


def _parts(v: object, where: str = "content") -> str | tuple[Mapping[str, Any], ...] | None:
    if v is None or isinstance(v, str):
        return v
    return tuple({**p, "type": "text"} if p.get("type") in _TEXT_PARTS else p for p in objects(v, where))


def _parts_wire(content: str | tuple[Mapping[str, Any], ...] | None, role: str) -> str | list[Json] | None:
    if content is None or isinstance(content, str):
        return content
    text = "output_text" if role == "assistant" else "input_text"
    return [{**p, "type": text} if p.get("type") == "text" else dict(p) for p in content]


def _tools(v: object, where: str = "tools") -> tuple[Mapping[str, Any], ...]:
    return each(typed_tool, v, where)


def _tools_wire(tools: Sequence[Mapping[str, Any]], where: str = "tools") -> list[Json]:
    wire = [typed_tool_wire(t) for t in tools]
    if (i := next((i for i, t in enumerate(wire) if t is None), None)) is not None:
        shape = "the Chat shape {'type': T, T: {...}}"
        raise Bad(f"{where}[{i}] must have {shape}, got {dict(tools[i])!r:.200}")
    return cast(list[Json], wire)


# --- input items -----------------------------------------------------------------------------


def _call(item: Mapping[str, Any], where: str) -> tuple[ToolCall, Json]:
    kind, args = _CALL_ITEMS[item["type"]]
    call = ToolCall(
        id=check(item.get("call_id"), f"{where}.call_id", "a string"),
        name=check(item.get("name"), f"{where}.name", "a string"),
        arguments=check(item.get(args), f"{where}.{args}", "a string"),
        type=kind,
    )
    return call, residual(item, _call_wire(call, where))


def _call_wire(c: ToolCall, where: str) -> Json:
    if c.type not in ("function", "custom"):
        raise Bad(f"{where}.type must be 'function' or 'custom' in the Responses API, got {c.type!r}")
    if c.type == "custom":
        return {"type": "custom_tool_call", "call_id": c.id, "name": c.name, "input": c.arguments}
    return {"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments}


def _message_fields(m: Message) -> Json:
    content = _parts_wire(m.content, m.role)
    return some({"role": m.role, "content": content, "name": m.name, "tool_call_id": m.tool_call_id})


def _message(item: Mapping[str, Any], where: str) -> Message:
    msg = Message(
        role=cast(Role, member(item.get("role"), f"{where}.role", _MESSAGE_ROLES)),
        content=_parts(item.get("content"), f"{where}.content"),
        name=opt_str(item.get("name"), f"{where}.name"),
        tool_call_id=opt_str(item.get("tool_call_id"), f"{where}.tool_call_id"),
    )
    return replace(msg, extra=residual(item, _message_fields(msg)))


def _output_fields(m: Message) -> Json:
    output = _parts_wire(m.content, "tool")
    fields = {"type": "function_call_output", "call_id": m.tool_call_id, "output": output, "name": m.name}
    return some(fields)


def _output(item: Mapping[str, Any], where: str) -> Message:
    msg = Message(
        "tool",
        content=_parts(item.get("output"), f"{where}.output"),
        tool_call_id=opt_str(item.get("call_id"), f"{where}.call_id"),
        name=opt_str(item.get("name"), f"{where}.name"),
    )
    return replace(msg, extra=residual(item, _output_fields(msg)))


def _rank(item: Mapping[str, Any]) -> int | None:
    """Where ``item`` sits in an assistant turn (reasoning, message, calls); None: not in one."""
    kind = item.get("type", "message" if "role" in item else None)
    if kind == "message":
        return 1 if item.get("role") == "assistant" and set(item) != {"role"} else None
    return 0 if kind == "reasoning" else 2 if kind in _CALL_ITEMS else None


def _joins(last: int | None, rank: int | None) -> bool:
    """Whether an item of ``rank`` continues the assistant turn whose last item had rank ``last``."""
    return last is not None and rank is not None and (rank == 2 or last == 0)


def _assistant(group: list[tuple[Json, str]]) -> Message:
    reasoning = [item for item, _ in group if item.get("type") == "reasoning"]
    msg = next((_message(item, at) for item, at in group if item.get("type", "message") == "message"), None)
    calls = [_call(item, at) for item, at in group if item.get("type") in _CALL_ITEMS]
    extra = dict(msg.extra) if msg else {}
    if reasoning:
        extra[REASONING_KEY] = reasoning
    if any(rest for _, rest in calls):
        extra[CALLS_KEY] = [rest for _, rest in calls]
    return replace(msg or Message("assistant"), tool_calls=tuple(c for c, _ in calls), extra=extra)


def _other(item: Json, where: str) -> Message:
    kind = item.get("type", "message" if "role" in item else None)
    if kind == "message":
        return _message(item, where)
    if kind in _OUTPUT_ITEMS:
        return _output(item, where)
    check(kind, f"{where}.type", "a string")
    return Message("tool" if kind.endswith("_output") else "assistant", extra={ITEM_KEY: item})


def _input(v: object, where: str = "input") -> tuple[Message, ...]:
    if v is None or isinstance(v, str):
        return () if v is None else (Message("user", v),)
    messages: list[Message] = []
    group: list[tuple[Json, str]] = []
    last: int | None = None
    for i, item in enumerate(objects(v, where)):
        at = f"{where}[{i}]"
        new = check(item.pop(NEW_MESSAGE_KEY, False), f"{at}.{NEW_MESSAGE_KEY}", "a boolean")
        rank = _rank(item)
        if not (_joins(last, rank) and not new) and group:
            messages.append(_assistant(group))
            group = []
        if rank is None:
            messages.append(_other(item, at))
        else:
            group.append((item, at))
        last = rank
    if group:
        messages.append(_assistant(group))
    return tuple(messages)


def _items(m: Message, where: str) -> list[Json]:
    """The input items of one Message, in the order ``_input`` reads them back."""
    if ITEM_KEY in m.extra:
        return [dict(obj(m.extra[ITEM_KEY], f"{where}.extra.{ITEM_KEY}"))]
    if m.tool_calls and m.role != "assistant":
        raise Bad(f"{where}.tool_calls: only assistant messages carry tool calls")
    wire = own(m.extra, _RESERVED)
    if m.role == "tool":
        return [merge(wire, _output_fields(m), _ITEM_PARSERS)]
    item = merge(wire, _message_fields(m), _ITEM_PARSERS)
    if m.role != "assistant":
        return [item]
    reasoning = [dict(r) for r in objects(m.extra.get(REASONING_KEY, ()), f"{where}.extra.{REASONING_KEY}")]
    rests = objects(m.extra.get(CALLS_KEY, ()), f"{where}.extra.{CALLS_KEY}")
    calls = [
        merge(rests[j] if j < len(rests) else {}, _call_wire(c, f"{where}.tool_calls[{j}]"), _ITEM_PARSERS)
        for j, c in enumerate(m.tool_calls)
    ]
    return [*reasoning, *([item] if set(item) != {"role"} or not (reasoning or calls) else []), *calls]


def _input_wire(messages: Sequence[Message], where: str = "messages") -> list[Json]:
    wire: list[Json] = []
    last: int | None = None
    for i, m in enumerate(messages):
        items = _items(m, f"{where}[{i}]")
        if m.role == "assistant" and ITEM_KEY not in m.extra and _joins(last, _rank(items[0])):
            items[0] = {**items[0], NEW_MESSAGE_KEY: True}
        wire.extend(items)
        last = _rank(items[-1])
    return wire


# --- requests --------------------------------------------------------------------------------


def _request_fields(req: LLMRequest) -> Json:
    head = {"model": req.model, "instructions": req.system_prompt, "input": _input_wire(req.messages) or None}
    return core.request_fields(req, _KEYS, {**head, "tools": _tools_wire(req.tools) or None})


@core.reports(LLMError, "cannot render the request for the OpenAI Responses API")
def request_to_responses(req: LLMRequest) -> Json:
    """The JSON body of ``POST /responses`` for ``req`` (with ARES extension keys)."""
    return core.request_wire(req, _request_fields, _PARSERS)


@core.reports(LLMError, "malformed OpenAI Responses request")
def request_from_responses(body: Mapping[str, Any]) -> LLMRequest:
    """The LLMRequest a Responses body stands for; raises ``LLMError`` if it is malformed."""
    b = obj(body, "the body")
    messages = _input(b.get("input"))
    system_prompt = opt_str(b.get("instructions"), "instructions")
    tools = _tools(b.get("tools"))
    return core.read_request(
        b, _KEYS, _request_fields, messages=messages, system_prompt=system_prompt, tools=tools
    )


# --- responses -------------------------------------------------------------------------------

_FINISH = {"max_output_tokens": "length", "content_filter": "content_filter"}
_STATUS: Mapping[str | None, tuple[str, str | None]] = {
    "stop": ("completed", None), "tool_calls": ("completed", None), "function_call": ("completed", None),
    None: ("in_progress", None),
    "length": ("incomplete", "max_output_tokens"), "content_filter": ("incomplete", "content_filter"),
}  # fmt: skip


def _finish(status: str | None, reason: str | None, calls: bool) -> str | None:
    if status == "completed":
        return "tool_calls" if calls else "stop"
    if status == "incomplete":
        return _FINISH.get(reason or "", "length")
    return None if status in (None, "in_progress") else status


def _summary(v: object, where: str = "output") -> tuple[Any, ...]:
    """(content, tool calls, reasoning items, logprobs) of an ``output`` array."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    reasoning: list[Json] = []
    logprobs: list[float] | None = None
    for i, item in enumerate(objects(v, where)):
        at, kind = f"{where}[{i}]", item.get("type")
        if kind == "reasoning":
            reasoning.append(item)
        elif kind in _CALL_ITEMS:
            calls.append(_call(item, at)[0])
        elif kind == "message":
            for j, part in enumerate(objects(item.get("content"), f"{at}.content")):
                if part.get("type") != "output_text":
                    continue
                texts.append(check(part.get("text"), f"{at}.content[{j}].text", "a string"))
                if (lps := part.get("logprobs")) is not None:
                    logprobs = (logprobs or []) + core.logprob_values(lps, f"{at}.content[{j}].logprobs")
    text = "".join(texts) if texts else None
    return text, tuple(calls), reasoning, None if logprobs is None else tuple(logprobs)


def _output_wire(r: LLMResponse) -> list[Json]:
    items = [dict(i) for i in objects(r.extra.get(REASONING_KEY, ()), REASONING_KEY)]
    if r.content is not None:
        part: Json = {"type": "output_text", "text": r.content, "annotations": []}
        if r.logprobs is not None:
            part["logprobs"] = [
                {"token": "", "bytes": [], "logprob": lp, "top_logprobs": []} for lp in r.logprobs
            ]
        items.append(
            {"type": "message", "id": "", "status": "completed", "role": "assistant", "content": [part]}
        )
    return items + [_call_wire(c, f"tool_calls[{i}]") for i, c in enumerate(r.tool_calls)]


def _usage(v: object, where: str = "usage") -> Usage | None:
    if v is None:
        return None
    return core.token_usage(obj(v, where), where, _usage_fields)


def _usage_fields(u: Usage) -> Json:
    return {
        "input_tokens": u.prompt_tokens,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": u.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": u.total_tokens,
    }


def _response_fields(r: LLMResponse) -> Json:
    status, reason = _STATUS.get(r.finish_reason, (cast(str, r.finish_reason), None))
    derived = _finish(status, reason, bool(r.tool_calls))
    top = {"id": r.id or "", "object": "response", "created_at": 0, "status": status, "error": None}
    top.update(incomplete_details=reason and {"reason": reason}, model=r.model or "", output=_output_wire(r))
    top.update(parallel_tool_calls=True, tool_choice="auto", tools=[])
    usage = None if r.usage is None else merge(r.usage.extra, _usage_fields(r.usage), _RESPONSE_PARSERS)
    ext = core.response_extensions(r, derived, logprobs=r.content is None)
    return {**top, **some({"usage": usage, **ext})}


@core.reports(MalformedResponseError, "cannot render the response as an OpenAI Responses object")
def response_to_responses(resp: LLMResponse) -> Json:
    """A complete, non-streaming Responses API ``response`` object for ``resp``."""
    return merge(own(resp.extra, _RESERVED), _response_fields(resp), _RESPONSE_PARSERS)


@core.reports(MalformedResponseError, "malformed OpenAI Responses response")
def response_from_responses(body: object) -> LLMResponse:
    """The LLMResponse of a ``response`` object; raises ``MalformedResponseError`` if malformed."""
    b = obj(body, "the body")
    if "output" not in b and b.get("error"):
        raise core.error_body(b, "a response")
    content, calls, reasoning, logprobs = _summary(b.get("output"))
    details = b.get("incomplete_details")
    reason = None if details is None else opt_str(obj(details, "incomplete_details").get("reason"), "reason")
    finish = opt_str(b.get(FINISH_REASON_KEY), FINISH_REASON_KEY)
    return core.read_response(
        b,
        _response_fields,
        content=content,
        tool_calls=calls,
        finish_reason=finish or _finish(opt_str(b.get("status"), "status"), reason, bool(calls)),
        usage=_usage(b.get("usage")),
        logprobs=logprobs,
        extra={REASONING_KEY: reasoning} if reasoning else {},
    )


#: How to read each modelled wire key, to tell a re-spelling kept in ``extra`` from a stale value.
# fmt: off
_ITEM_PARSERS: Mapping[str, Any] = {
    "content": _parts, "output": _parts, "name": opt_str, "tool_call_id": opt_str, "call_id": opt_str,
    "arguments": opt_str, "input": opt_str, "role": opt_str,
}
_PARSERS: Mapping[str, Any] = {
    "model": opt_str, "instructions": opt_str, "input": _input, "tools": _tools, **_KEYS.parsers(),
}
_RESPONSE_PARSERS: Mapping[str, Any] = {**core.RESPONSE_PARSERS, "output": _summary, "usage": _usage}
# fmt: on
