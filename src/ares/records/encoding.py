"""Step records to JSON text, re-using the text of LLM objects already encoded.

A step's request appears twice (as the observation and as the trace's prompt) and consecutive steps
often share one request or response object; all of them are immutable, so the JSON of each is
computed once and kept by identity (with a reference, so an id is never reused while cached).

Those references keep an episode's requests, responses and messages alive, so a collector keeps one
``JsonFragments`` per open episode and drops it when the episode ends: nothing cached outlives its
episode, and a run of any length holds only its open episodes' fragments. Within an episode the
cached texts are bounded by count and by size, since a long episode's requests grow with its history.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import orjson

from ares.llm.openai_chat import message_to_openai
from ares.llm.types import LLMRequest, LLMResponse, Message
from ares.records.model import StepRecord, encode_value
from ares.records.rollout_trace import StepTrace, prompt_messages, response_message


def dumps(value: Any) -> str:
    """Compact JSON text (orjson, ~15x faster than ``json``); ``json`` for what orjson refuses."""
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:  # e.g. integers beyond 64 bits
        return json.dumps(value, separators=(",", ":"))


class JsonFragments:
    """JSON text of one episode's recently seen objects, keyed by (kind, identity); least recently
    used evicted past ``size`` texts or ``max_chars`` characters in all (a longer text is not kept).

    Also keeps each message's OpenAI form: requests of one episode share their history's messages,
    so a step renders only the messages that are new.
    """

    def __init__(self, size: int = 16, max_chars: int = 1 << 20, messages: int = 8192) -> None:
        self._size = size
        self._max_chars = max_chars
        self._chars = 0
        self._cache: OrderedDict[tuple[str, int], tuple[Any, str]] = OrderedDict()
        self._max_messages = messages
        self._messages: dict[int, tuple[Message, dict[str, Any]]] = {}

    @property
    def cached_objects(self) -> int:
        """Objects held (by texts and by the message cache)."""
        return len(self._cache) + len(self._messages)

    @property
    def cached_chars(self) -> int:
        """Characters of JSON text held."""
        return self._chars

    def text(self, kind: str, obj: Any, render: Callable[[Any], Any]) -> str:
        if obj is None:
            return "null"
        key = (kind, id(obj))
        hit = self._cache.get(key)
        if hit is not None and hit[0] is obj:
            self._cache.move_to_end(key)
            return hit[1]
        text = dumps(render(obj))
        if len(text) > self._max_chars:
            return text
        self._cache[key] = (obj, text)
        self._chars += len(text)
        while len(self._cache) > self._size or self._chars > self._max_chars:
            self._chars -= len(self._cache.popitem(last=False)[1][1])
        return text

    def message(self, message: Message) -> dict[str, Any]:
        """``message_to_openai(message)``, computed once per message object (treat it as read-only)."""
        hit = self._messages.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        if len(self._messages) >= self._max_messages:
            self._messages.clear()
        rendered = message_to_openai(message)
        self._messages[id(message)] = (message, rendered)
        return rendered

    def value(self, value: Any) -> Any:
        """``encode_value(value)`` with the request's messages from the message cache."""
        return encode_value(value, self.message)

    def prompt(self, observation: Any) -> Any:
        return prompt_messages(observation, self.message)


def step_json_text(step: StepRecord, fragments: JsonFragments) -> str:
    """``dumps(step.to_json())``, field order aside, with cached fragments spliced in."""
    head = dumps(
        {
            "index": step.index,
            "step_type": step.step_type,
            "reward": step.reward,
            "discount": step.discount,
            "started_at": step.started_at,
            "ended_at": step.ended_at,
            "latency_s": step.latency_s,
        }
    )
    observation = fragments.text("value", step.observation, fragments.value)
    action = fragments.text("value", step.action, fragments.value)
    trace = _trace_text(step, fragments)
    call = "" if step.call is None else f',"call":{dumps(step.call.to_json())}'
    return f'{head[:-1]},"observation":{observation},"action":{action},"trace":{trace}{call}}}'


def _trace_text(step: StepRecord, fragments: JsonFragments) -> str:
    trace = step.trace
    if trace is None:
        return "null"
    if not isinstance(trace, StepTrace):
        return dumps(dict(trace))
    observation, action, rest = trace.parts()
    # The prompt/response of a trace are the previous step's observation and this step's action:
    # stored once, with a pointer the loader follows (EpisodeRecord.from_json), not the text twice.
    if isinstance(observation, LLMRequest) and trace.previous_observation:
        prompt = '"prompt_from":"previous_observation"'
    elif isinstance(observation, LLMRequest) and observation is step.observation:
        prompt = '"prompt_from":"observation"'
    else:
        prompt = f'"prompt":{fragments.text("prompt", observation, fragments.prompt)}'
    if isinstance(action, LLMResponse) and action is step.action:
        response = '"response_from":"action"'
    else:
        response = f'"response":{fragments.text("response", action, response_message)}'
    return f"{dumps(rest)[:-1]},{prompt},{response}}}"
