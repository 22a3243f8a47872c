"""What the three wire dialects read and render alike, written once: a request's sampling controls,
model, ARES extension keys and unmodelled rest; a response's ARES extension keys; the public errors.

OpenAI Chat, OpenAI Responses and Anthropic Messages spell a few sampling keys their own way
(``max_output_tokens``, ``stop_sequences``) and order them differently, and that is all they differ
in here: a ``RequestKeys`` says how, so each dialect module keeps only what is its own (messages,
tools, content, finish reasons). Built on ``_wire``; private to ``ares.llm`` like it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import wraps
from types import MappingProxyType
from typing import Any, ParamSpec, TypeVar

from ares.llm._wire import (
    COST_KEY,
    METADATA_KEY,
    PROMPT_TOKEN_IDS_KEY,
    Bad,
    Json,
    Parsers,
    check,
    listed,
    merge,
    obj,
    opt_id,
    opt_int,
    opt_ints,
    opt_num,
    opt_nums,
    opt_obj,
    opt_str,
    opt_strs,
    residual,
    seq,
    some,
)
from ares.llm.types import LLMRequest, LLMResponse, Message, SamplingParams, ToolCall, Usage

P = ParamSpec("P")
R = TypeVar("R")

#: Response extension keys of the dialects whose wire has no place for token ids, logprobs or every
#: finish reason (Responses, Messages; Chat has its own places for the first two).
TOKEN_IDS_KEY = "ares_token_ids"
LOGPROBS_KEY = "ares_logprobs"
FINISH_REASON_KEY = "ares_finish_reason"
POLICY_VERSION_KEY = "ares_policy_version"
#: The ``extra`` key under which a dialect keeps reasoning items (or thinking blocks) verbatim.
REASONING_KEY = "ares_reasoning"


def reports(error: Callable[[str], Exception], what: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A converter that raises ``error("<what>: <why>")`` for a malformed value: ``Bad`` stays inside."""

    def decorate(convert: Callable[P, R]) -> Callable[P, R]:
        @wraps(convert)
        def reported(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return convert(*args, **kwargs)
            except Bad as e:
                raise error(f"{what}: {e}") from None

        return reported

    return decorate


def error_body(b: Mapping[str, Any], expected: str) -> Bad:
    """The error for a provider's error object where ``expected`` (``a message``...) should be."""
    return Bad(f"the body is an error object, not {expected}: {str(b.get('error'))[:300]}")


# --- requests ---------------------------------------------------------------------------------

_NONE: Mapping[str, Any] = MappingProxyType({})
_READERS: Mapping[str, Callable[..., Any]] = {
    "temperature": opt_num, "top_p": opt_num, "max_tokens": opt_int, "stop": opt_strs, "seed": opt_int,
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class RequestKeys:
    """Where a dialect's request body keeps the neutral sampling fields.

    ``controls`` are all its top-level sampling keys: the unmodelled ones are kept in
    ``SamplingParams.extra``, other unmodelled keys in ``LLMRequest.extra``. ``max_tokens`` and
    ``stop`` are the wire names of those fields, ``order`` the order the fields are rendered in,
    ``read_stop`` how the stop key reads (Chat takes a bare string there too).
    """

    controls: frozenset[str]
    max_tokens: str = "max_tokens"
    stop: str = "stop"
    order: tuple[str, ...] = ("temperature", "top_p", "max_tokens", "stop", "seed")
    read_stop: Callable[..., tuple[str, ...] | None] = opt_strs

    def sampling(self) -> tuple[tuple[str, str], ...]:
        """Each ``SamplingParams`` field with its wire key, in the order rendered (and read)."""
        renamed = {"max_tokens": self.max_tokens, "stop": self.stop}
        return tuple((field, renamed.get(field, field)) for field in self.order)

    def reader(self, field: str) -> Callable[..., Any]:
        """How ``field``'s wire value reads: ``reader(field)(value, where)``."""
        return self.read_stop if field == "stop" else _READERS[field]

    def parsers(self) -> dict[str, Callable[..., Any]]:
        """How ``merge`` reads each key these fields render to, the ARES extension keys too."""
        sampling = {wire: self.reader(field) for field, wire in self.sampling()}
        return {**sampling, PROMPT_TOKEN_IDS_KEY: opt_ints, METADATA_KEY: opt_obj}


def sampling_wire(s: SamplingParams, keys: RequestKeys) -> Json:
    """``s``'s neutral fields under the dialect's keys, None where unset (``some`` drops those)."""
    return {wire: listed(s.stop) if f == "stop" else getattr(s, f) for f, wire in keys.sampling()}


def extensions_wire(req: LLMRequest) -> Json:
    """The request extension keys every dialect carries, None where unset."""
    return {METADATA_KEY: dict(req.metadata) or None, PROMPT_TOKEN_IDS_KEY: listed(req.prompt_token_ids)}


def request_fields(req: LLMRequest, keys: RequestKeys, head: Json, tail: Mapping[str, Any] = _NONE) -> Json:
    """The canonical top level of ``req``: ``head`` (the dialect's own keys), the sampling fields,
    ``tail``, the extension keys; None values left off."""
    return some({**head, **sampling_wire(req.sampling, keys), **tail, **extensions_wire(req)})


def request_wire(req: LLMRequest, render: Callable[[LLMRequest], Json], parsers: Parsers) -> Json:
    """``req``'s body: the dialect's canonical ``render``-ing with the unmodelled keys put back."""
    return merge({**req.extra, **req.sampling.extra}, render(req), parsers)


def read_request(
    b: Mapping[str, Any],
    keys: RequestKeys,
    render: Callable[[LLMRequest], Json],
    *,
    messages: Sequence[Message],
    system_prompt: str | None,
    tools: tuple[Mapping[str, Any], ...],
    skip: str = "",
) -> LLMRequest:
    """The request body ``b`` stands for, given the parts its dialect has read already.

    ``render`` is the dialect's canonical rendering; the keys of ``b`` it does not reproduce are
    kept, the sampling ones in ``SamplingParams.extra``. ``skip`` names a key whose differences
    the parts keep themselves (Chat's ``messages``, in each message's ``extra``).
    """
    req = LLMRequest(
        messages=tuple(messages),
        system_prompt=system_prompt,
        tools=tools,
        sampling=SamplingParams(**{f: keys.reader(f)(b.get(w), w) for f, w in keys.sampling()}),
        model=opt_str(b.get("model"), "model"),
        prompt_token_ids=opt_ints(b.get(PROMPT_TOKEN_IDS_KEY), PROMPT_TOKEN_IDS_KEY),
        metadata=opt_obj(b.get(METADATA_KEY)),
    )
    rest = residual(b, render(req), skip)
    if sampling_extra := {k: v for k, v in rest.items() if k in keys.controls}:
        req = replace(req, sampling=replace(req.sampling, extra=sampling_extra))
    extra = {k: v for k, v in rest.items() if k not in keys.controls}
    return replace(req, extra=extra) if extra else req


# --- responses --------------------------------------------------------------------------------

#: How ``merge`` reads the response keys ``read_response`` and ``token_usage`` read.
RESPONSE_PARSERS: Parsers = {
    "id": opt_id, "model": opt_id, COST_KEY: opt_num, TOKEN_IDS_KEY: opt_ints, LOGPROBS_KEY: opt_nums,
    "input_tokens": opt_int, "output_tokens": opt_int, POLICY_VERSION_KEY: opt_int,
}  # fmt: skip


def logprob_values(v: object, where: str) -> list[float]:
    """The ``logprob`` of each entry of an array of token logprobs, the shape both OpenAI APIs use."""
    return [
        check(obj(e, f"{where}[{i}]").get("logprob"), f"{where}[{i}].logprob", "a number")
        for i, e in enumerate(seq(v, where))
    ]


def token_usage(u: Mapping[str, Any], where: str, render: Callable[[Usage], Json]) -> Usage:
    """``input_tokens`` / ``output_tokens`` usage (Responses and Messages count so), the rest in ``extra``."""
    usage = Usage(
        check(u.get("input_tokens"), f"{where}.input_tokens", "an integer"),
        check(u.get("output_tokens"), f"{where}.output_tokens", "an integer"),
    )
    return replace(usage, extra=residual(u, render(usage)))


def read_response(
    b: Mapping[str, Any],
    render: Callable[[LLMResponse], Json],
    *,
    content: str | None,
    tool_calls: tuple[ToolCall, ...],
    finish_reason: str | None,
    usage: Usage | None,
    logprobs: tuple[float, ...] | None,
    extra: Mapping[str, Any],
) -> LLMResponse:
    """The response object ``b`` stands for, given the parts its dialect has read already.

    The id, model and ARES extension keys are read here; ``logprobs`` are the wire's own, which
    ``ares_logprobs`` replaces when present. The keys of ``b`` that ``render`` does not reproduce
    are added to ``extra``.
    """
    resp = LLMResponse(
        content=content,
        tool_calls=tool_calls,
        finish_reason=finish_reason,
        usage=usage,
        cost=opt_num(b.get(COST_KEY), COST_KEY),
        model=opt_id(b.get("model"), "model"),
        id=opt_id(b.get("id")),
        token_ids=opt_ints(b.get(TOKEN_IDS_KEY), TOKEN_IDS_KEY),
        logprobs=logprobs if LOGPROBS_KEY not in b else opt_nums(b[LOGPROBS_KEY], LOGPROBS_KEY),
        extra=extra,
        policy_version=opt_int(b.get(POLICY_VERSION_KEY), POLICY_VERSION_KEY),
    )
    return replace(resp, extra={**resp.extra, **residual(b, render(resp))})


def response_extensions(r: LLMResponse, derived_finish: str | None, *, logprobs: bool = True) -> Json:
    """``r``'s ARES extension keys, None where not needed: cost, token ids, logprobs (unless the wire
    holds them), and the finish reason when the wire's own reads back as ``derived_finish`` instead."""
    return {
        COST_KEY: r.cost,
        TOKEN_IDS_KEY: listed(r.token_ids),
        LOGPROBS_KEY: listed(r.logprobs) if logprobs else None,
        FINISH_REASON_KEY: r.finish_reason if derived_finish != r.finish_reason else None,
        POLICY_VERSION_KEY: r.policy_version,
    }
