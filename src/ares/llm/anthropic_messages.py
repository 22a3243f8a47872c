"""Lossless conversion between ARES LLM values and the Anthropic Messages API wire format.

Same contract as :mod:`ares.llm.openai_chat`: wire values are plain JSON dicts, the conversions
are exact inverses, and a wire key we do not model (or spell differently from our canonical
rendering) is kept verbatim in the nearest ``extra`` and written back as it was.

Requests (``POST /v1/messages``) read into the neutral shapes every dialect shares:

- ``system`` is ``system_prompt``; a list of system blocks reads as their texts joined by a blank
  line (the blocks, with their ``cache_control``, come back from ``extra``).
- A user message's leading ``tool_result`` blocks are tool Messages (``tool_use_id`` is
  ``tool_call_id``; ``is_error``, ``cache_control`` in ``extra``); its other blocks stay a user
  Message whose content is the blocks, verbatim. Rendering puts consecutive tool Messages, and a
  following user Message with block content, back into one user message.
- An assistant message's ``tool_use`` blocks are ``tool_calls`` (``input`` as compact JSON text;
  rendering requires a JSON object there), its text blocks joined are ``content``, its
  ``thinking`` / ``redacted_thinking`` blocks are kept verbatim in ``extra["ares_reasoning"]``.
- Tools: ``{"name", "description", "input_schema", ...}`` reads as the Chat shape
  ``{"type": "function", "function": {"name", "description", "parameters", ...}}``; a typed
  (server or client built-in) tool ``{"type": T, **rest}`` reads as ``{"type": T, T: rest}``.
- ``stop_sequences`` is ``sampling.stop``; ``top_k`` and ``thinking`` go to ``sampling.extra``.

What the wire cannot tell apart reads back normalised: ``ToolCall.arguments`` as compact JSON
(``separators=(",", ":")``, non-ASCII kept), assistant content parts as their joined text, user block
content that starts with ``tool_result`` blocks as tool Messages. Rendering raises ``LLMError``
(``MalformedResponseError`` for responses) for what the API cannot hold: arguments that are not a
JSON object, a ``ToolCall.type`` other than ``function``, developer messages (use
``system_prompt``), tool calls on a non-assistant message, a tool in neither shape above. A
``system`` message between the turns (Claude Code 2.1 sends its environment notes as one) reads as a
system Message, its content verbatim, and renders back in place.

Responses (a ``message`` object) read the same way as assistant messages. ``stop_reason`` maps to
``finish_reason``: ``end_turn`` / ``stop_sequence`` -> ``stop``, ``max_tokens`` and
``model_context_window_exceeded`` -> ``length``, ``tool_use`` -> ``tool_calls``, ``refusal`` ->
``content_filter``; others (``pause_turn``) pass through. Usage: ``input_tokens`` (which excludes
cached tokens, as on the wire) / ``output_tokens`` are ``prompt_tokens`` / ``completion_tokens``;
``cache_*_input_tokens`` and the rest stay in ``Usage.extra``. A missing ``id``/``model`` is written
as ``""`` and ``""`` reads back as None (the SDK requires strings there). ``reasoning_text`` reads
the thinking text of a response.

Reserved Message ``extra`` keys: ``ares_reasoning`` (above), ``ares_turn`` (keys of a user message
whose first block is a tool result, on its first tool Message) and ``ares_new_turn`` (this tool or
user Message starts a new wire message although it could join the previous one).

ARES extension keys (``strip_extensions`` removes them): request ``ares_prompt_token_ids``,
``ares_metadata`` (as in :mod:`ares.llm.openai_chat`); response ``ares_cost``, ``ares_token_ids``,
``ares_logprobs`` (``LLMResponse.cost`` / ``token_ids`` / ``logprobs``: Anthropic has none),
``ares_finish_reason`` (a finish reason ``stop_reason`` cannot express, e.g.
``function_call``) and ``ares_no_usage: true`` (``usage`` is None; the wire ``usage`` is required, so zeros).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

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
    flag,
    merge,
    obj,
    objects,
    opt_int,
    opt_str,
    own,
    residual,
    seq,
    some,
    typed_tool,
    typed_tool_wire,
)
from ares.llm._wire import strip_extensions as strip_extensions  # re-exported: part of this API
from ares.llm.codec_core import FINISH_REASON_KEY, REASONING_KEY
from ares.llm.codec_core import LOGPROBS_KEY as LOGPROBS_KEY
from ares.llm.codec_core import TOKEN_IDS_KEY as TOKEN_IDS_KEY
from ares.llm.types import LLMRequest, LLMResponse, Message, Role, ToolCall, Usage

TURN_KEY = "ares_turn"
NEW_TURN_KEY = "ares_new_turn"
NO_USAGE_KEY = "ares_no_usage"
_RESERVED = frozenset({REASONING_KEY, TURN_KEY, NEW_TURN_KEY})

#: Top-level request keys that are generation controls; unmodelled ones go to SamplingParams.extra.
SAMPLING_KEYS = frozenset(
    {"temperature", "top_p", "max_tokens", "stop_sequences", "seed", "top_k", "thinking"}
)
_KEYS = core.RequestKeys(SAMPLING_KEYS, stop="stop_sequences")
_THINKING = frozenset({"thinking", "redacted_thinking"})
SYSTEM_SEPARATOR = "\n\n"


def reasoning_text(resp: LLMResponse) -> str | None:
    """The text of a response's ``thinking`` blocks (None if it has none)."""
    blocks = [
        b for b in resp.extra.get(REASONING_KEY, ()) if isinstance(b, Mapping) and b.get("type") == "thinking"
    ]
    return "".join(str(b.get("thinking", "")) for b in blocks) if blocks else None


# --- blocks and tools ------------------------------------------------------------------------


def _blocks(v: object, where: str = "content") -> str | tuple[Mapping[str, Any], ...] | None:
    return v if v is None or isinstance(v, str) else objects(v, where)


def _blocks_wire(content: str | tuple[Mapping[str, Any], ...] | None) -> str | list[Json] | None:
    return content if content is None or isinstance(content, str) else [dict(b) for b in content]


def _system(v: object, where: str = "system") -> str | None:
    if v is None or isinstance(v, str):
        return v
    texts = (check(b.get("text"), f"{where}[{i}].text", "a string") for i, b in enumerate(objects(v, where)))
    return SYSTEM_SEPARATOR.join(texts)


def _tools(v: object, where: str = "tools") -> tuple[Mapping[str, Any], ...]:
    return each(_tool, v, where)


def _tool(t: Json, where: str) -> Mapping[str, Any]:
    """Client tools (untyped or ``custom``) in the Chat function shape; typed ones as ``typed_tool``."""
    kind = t.get("type", "custom")
    if kind in ("function", "custom") and ("parameters" in t or kind == "function"):
        raise Bad(f"{where} is not an Anthropic tool (type 'function', or 'parameters' for 'input_schema')")
    if kind != "custom":
        return typed_tool(t, where)
    return {"type": "function", "function": {_RENAME.get(k, k): x for k, x in t.items()}}


_RENAME = {"input_schema": "parameters", "parameters": "input_schema"}


def _tools_wire(tools: Sequence[Mapping[str, Any]], where: str = "tools") -> list[Json]:
    return [_tool_wire(t, f"{where}[{i}]") for i, t in enumerate(tools)]


def _tool_wire(t: Mapping[str, Any], where: str) -> Json:
    fn = t.get("function") if set(t) == {"type", "function"} and t["type"] == "function" else None
    if isinstance(fn, Mapping) and fn.get("type", "custom") == "custom" and "input_schema" not in fn:
        return {_RENAME.get(k, k): x for k, x in fn.items()}
    if t.get("type") not in ("function", "custom") and (wire := typed_tool_wire(t)) is not None:
        return wire
    shape = "a Chat-shaped function or {'type': T, T: {...}}"
    raise Bad(f"{where} has no Anthropic form (expected {shape}): {dict(t)!r:.200}")


# --- assistant content -----------------------------------------------------------------------


def _summary(v: object, where: str = "content") -> tuple[Any, ...]:
    """(text, tool calls, thinking blocks) of assistant content."""
    if v is None or isinstance(v, str):
        return v, (), []
    texts: list[str] = []
    calls: list[ToolCall] = []
    thinking: list[Json] = []
    for i, b in enumerate(objects(v, where)):
        at, kind = f"{where}[{i}]", b.get("type")
        if kind == "text":
            texts.append(check(b.get("text"), f"{at}.text", "a string"))
        elif kind == "tool_use":
            args = json.dumps(obj(b.get("input"), f"{at}.input"), ensure_ascii=False, separators=(",", ":"))
            name = check(b.get("name"), f"{at}.name", "a string")
            calls.append(ToolCall(check(b.get("id"), f"{at}.id", "a string"), name, args))
        elif kind in _THINKING:
            thinking.append(b)
    return ("".join(texts) if texts else None), tuple(calls), thinking


def _tool_use(c: ToolCall, where: str) -> Json:
    if c.type != "function":
        raise Bad(f"{where}.type must be 'function' for Anthropic tool_use, got {c.type!r}")
    try:
        args = json.loads(c.arguments)
    except ValueError:
        args = None
    if not isinstance(args, dict):
        raise Bad(
            f"{where}.arguments must be a JSON object for Anthropic tool_use input, got {c.arguments!r:.100}"
        )
    return {"type": "tool_use", "id": c.id, "name": c.name, "input": args}


def _content_wire(
    content: str | tuple[Mapping[str, Any], ...] | None,
    calls: Sequence[ToolCall],
    extra: Mapping[str, Any],
    where: str,
) -> list[Json]:
    """Canonical assistant blocks; ``where`` is the path prefix (``""`` or ``"messages[3]."``)."""
    thinking = [dict(b) for b in objects(extra.get(REASONING_KEY, ()), f"{where}extra.{REASONING_KEY}")]
    text = [{"type": "text", "text": content}] if isinstance(content, str) else _blocks_wire(content) or []
    return [*thinking, *text, *(_tool_use(c, f"{where}tool_calls[{i}]") for i, c in enumerate(calls))]


# --- messages --------------------------------------------------------------------------------


def _assistant_fields(m: Message, where: str) -> Json:
    plain = not m.tool_calls and REASONING_KEY not in m.extra and not isinstance(m.content, tuple)
    content = m.content if plain else _content_wire(m.content, m.tool_calls, m.extra, f"{where}.")
    return some({"role": "assistant", "content": content, "name": m.name, "tool_call_id": m.tool_call_id})


def _assistant(m: Mapping[str, Any], where: str) -> Message:
    text, calls, thinking = _summary(m.get("content"), f"{where}.content")
    msg = Message(
        "assistant",
        text,
        calls,
        name=opt_str(m.get("name"), f"{where}.name"),
        tool_call_id=opt_str(m.get("tool_call_id"), f"{where}.tool_call_id"),
        extra={REASONING_KEY: thinking} if thinking else {},
    )
    return replace(msg, extra={**msg.extra, **residual(m, _assistant_fields(msg, where))})


def _turn_fields(m: Message) -> Json:
    """A user or system message with ``m``'s content, verbatim."""
    content = _blocks_wire(m.content)
    return some({"role": m.role, "content": content, "name": m.name, "tool_call_id": m.tool_call_id})


def _turn(role: Role, m: Mapping[str, Any], where: str, content: object) -> Message:
    msg = Message(
        role,
        content,
        name=opt_str(m.get("name"), f"{where}.name"),
        tool_call_id=opt_str(m.get("tool_call_id"), f"{where}.tool_call_id"),
    )
    return replace(msg, extra=residual(m, _turn_fields(msg)))


def _result_fields(m: Message) -> Json:
    fields = {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": _blocks_wire(m.content)}
    return some({**fields, "name": m.name})


def _result(b: Mapping[str, Any], where: str) -> Message:
    msg = Message(
        "tool",
        _blocks(b.get("content"), f"{where}.content"),
        tool_call_id=opt_str(b.get("tool_use_id"), f"{where}.tool_use_id"),
        name=opt_str(b.get("name"), f"{where}.name"),
    )
    return replace(msg, extra=residual(b, _result_fields(msg)))


def _user(m: Mapping[str, Any], where: str) -> list[Message]:
    content = _blocks(m.get("content"), f"{where}.content")
    blocks = content if isinstance(content, tuple) else ()
    n = next((i for i, b in enumerate(blocks) if b.get("type") != "tool_result"), len(blocks))
    if not n:
        return [_turn("user", m, where, content)]
    tools = [_result(b, f"{where}.content[{i}]") for i, b in enumerate(blocks[:n])]
    if turn := {k: v for k, v in m.items() if k not in ("role", "content")}:
        tools[0] = replace(tools[0], extra={**tools[0].extra, TURN_KEY: turn})
    return tools + ([Message("user", blocks[n:])] if blocks[n:] else [])


def _joins(open_results: bool, m: Message) -> bool:
    """Whether ``m`` renders into the previous user message (which holds only tool results)."""
    if not open_results or m.extra.get(NEW_TURN_KEY):
        return False
    plain = m.name is None and m.tool_call_id is None and not own(m.extra, _RESERVED)
    return m.role == "tool" or (
        m.role == "user" and bool(m.content) and isinstance(m.content, tuple) and plain
    )


def _messages(v: object, where: str = "messages") -> tuple[Message, ...]:
    out: list[Message] = []
    for i, m in enumerate(objects(v, where)):
        at = f"{where}[{i}]"
        if (role := m.get("role")) == "assistant":
            out.append(_assistant(m, at))
            continue
        if role == "system":  # between the turns: Claude Code sends its environment notes so
            out.append(_turn("system", m, at, _blocks(m.get("content"), f"{at}.content")))
            continue
        if role != "user":
            raise Bad(f"{at}.role must be 'user', 'assistant' or 'system', got {role!r}")
        split = _user(m, at)
        if _joins(bool(out) and out[-1].role == "tool", split[0]):
            split[0] = replace(split[0], extra={**split[0].extra, NEW_TURN_KEY: True})
        out.extend(split)
    return tuple(out)


def _messages_wire(messages: Sequence[Message], where: str = "messages") -> list[Json]:
    wire: list[Json] = []
    open_results = False
    for i, m in enumerate(messages):
        at = f"{where}[{i}]"
        if m.tool_calls and m.role != "assistant":
            raise Bad(f"{at}.tool_calls: only assistant messages carry tool calls")
        joins = _joins(open_results, m)
        if m.role == "assistant":
            wire.append(merge(own(m.extra, _RESERVED), _assistant_fields(m, at), _ASSISTANT_PARSERS))
        elif m.role == "tool":
            block = merge(own(m.extra, _RESERVED), _result_fields(m), _PARSERS)
            if joins:
                wire[-1]["content"].append(block)
            else:
                turn = obj(m.extra.get(TURN_KEY, {}), f"{at}.extra.{TURN_KEY}")
                wire.append({"role": "user", "content": [block], **turn})
        elif m.role == "user":
            if joins:
                wire[-1]["content"].extend(_blocks_wire(m.content) or ())
            else:
                wire.append(merge(own(m.extra, _RESERVED), _turn_fields(m), _PARSERS))
        elif m.role == "system":
            wire.append(merge(own(m.extra, _RESERVED), _turn_fields(m), _PARSERS))
        else:
            raise Bad(f"{at}.role {m.role!r} has no Anthropic form (system text goes in system_prompt)")
        open_results = m.role == "tool"
    return wire


# --- requests --------------------------------------------------------------------------------


def _request_fields(req: LLMRequest) -> Json:
    head = {"model": req.model, "system": req.system_prompt, "messages": _messages_wire(req.messages)}
    return core.request_fields(req, _KEYS, {**head, "tools": _tools_wire(req.tools) or None})


@core.reports(LLMError, "cannot render the request for the Anthropic Messages API")
def request_to_anthropic(req: LLMRequest) -> Json:
    """The JSON body of ``POST /v1/messages`` for ``req`` (with ARES extension keys)."""
    return core.request_wire(req, _request_fields, _PARSERS)


@core.reports(LLMError, "malformed Anthropic Messages request")
def request_from_anthropic(body: Mapping[str, Any]) -> LLMRequest:
    """The LLMRequest a Messages body stands for; raises ``LLMError`` if it is malformed."""
    b = obj(body, "the body")
    messages, system_prompt = _messages(b.get("messages")), _system(b.get("system"))
    tools = _tools(b.get("tools"))
    return core.read_request(
        b, _KEYS, _request_fields, messages=messages, system_prompt=system_prompt, tools=tools
    )


# --- responses -------------------------------------------------------------------------------

# fmt: off
_FINISH = {
    "end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls",
    "refusal": "content_filter", "model_context_window_exceeded": "length",
}
_STOP_REASON = {
    "stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "function_call": "tool_use",
    "content_filter": "refusal",
}
# fmt: on


def _finish(v: object, where: str = "stop_reason") -> str | None:
    reason = opt_str(v, where)
    return _FINISH.get(reason, reason) if reason is not None else None


def _usage(v: object, where: str = "usage") -> Usage:
    u = obj(v, where)
    for key in ("cache_creation_input_tokens", "cache_read_input_tokens"):
        opt_int(u.get(key), f"{where}.{key}")
    return core.token_usage(u, where, _usage_fields)


def _usage_fields(u: Usage) -> Json:
    return {"input_tokens": u.prompt_tokens, "output_tokens": u.completion_tokens}


def _response_fields(r: LLMResponse) -> Json:
    stop_reason = None if r.finish_reason is None else _STOP_REASON.get(r.finish_reason, r.finish_reason)
    usage = r.usage or Usage()
    top = {"id": r.id or "", "type": "message", "role": "assistant", "model": r.model or ""}
    top.update(content=_content_wire(r.content, r.tool_calls, r.extra, ""), stop_reason=stop_reason)
    top.update(stop_sequence=None, usage=merge(usage.extra, _usage_fields(usage), _PARSERS))
    ext = core.response_extensions(r, _finish(stop_reason))
    return {**top, **some({**ext, NO_USAGE_KEY: r.usage is None or None})}


@core.reports(MalformedResponseError, "cannot render the response as an Anthropic message")
def response_to_anthropic(resp: LLMResponse) -> Json:
    """A complete, non-streaming Messages API ``message`` object for ``resp``."""
    return merge(own(resp.extra, _RESERVED), _response_fields(resp), _ASSISTANT_PARSERS)


@core.reports(MalformedResponseError, "malformed Anthropic Messages response")
def response_from_anthropic(body: object) -> LLMResponse:
    """The LLMResponse of a ``message`` object; raises ``MalformedResponseError`` if malformed."""
    b = obj(body, "the body")
    if b.get("type") == "error" or ("content" not in b and "error" in b):
        raise core.error_body(b, "a message")
    text, calls, thinking = _summary(seq(b.get("content"), "content"))
    finish = opt_str(b.get(FINISH_REASON_KEY), FINISH_REASON_KEY)
    no_usage = flag(b.get(NO_USAGE_KEY), NO_USAGE_KEY)
    return core.read_response(
        b,
        _response_fields,
        content=text,
        tool_calls=calls,
        finish_reason=finish or _finish(b.get("stop_reason")),
        usage=None if no_usage else _usage(b.get("usage")),
        logprobs=None,  # Anthropic has none: only ``ares_logprobs`` carries them
        extra={REASONING_KEY: thinking} if thinking else {},
    )


#: How to read each modelled wire key, to tell a re-spelling kept in ``extra`` from a stale value.
# fmt: off
_PARSERS: Mapping[str, Any] = {
    **core.RESPONSE_PARSERS, "system": _system, "messages": _messages, "tools": _tools, **_KEYS.parsers(),
    "content": _blocks, "name": opt_str, "tool_call_id": opt_str, "tool_use_id": opt_str,
    "stop_reason": _finish, "usage": _usage,
}
# fmt: on
#: Assistant content is read for its text, calls and thinking: other spellings of those are kept.
_ASSISTANT_PARSERS: Mapping[str, Any] = {**_PARSERS, "content": _summary}
