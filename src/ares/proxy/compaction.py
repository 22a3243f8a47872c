"""Compactions an external agent does on its own (Claude Code, Codex), detected from its requests.

A CLI that outgrows its context summarizes and starts over from a short conversation. Nothing in
its HTTP calls says so, but the requests show it: the agent's main thread is the run of requests
with one system prompt and one tool set, each extending the previous one's messages. A request of
that thread whose messages do not begin with the previous request's messages (it dropped or
rewrote history) is the first request after a compaction, and is marked like the built-in agents'
(``metadata[CONTEXT_KEY] == "compacted"``, numbered by ``COMPACTION_KEY``), so the turn view and
``ares.training`` start a new sequence there. Requests with another system prompt or tool set (a
CLI's side calls: titles, summaries, safety checks) are left unmarked and do not move the thread.

Messages are compared by role, text and tool calls only: CLIs move cache markers and re-serialize
parts between calls, which is not a rewrite.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ares.llm.context_marks import COMPACTION_KEY, CONTEXT_KEY
from ares.llm.types import LLMRequest, Message


def _message_key(message: Message) -> tuple[str, str, str]:
    calls = json.dumps([[c.name, c.arguments] for c in message.tool_calls])
    return message.role, message.text, calls


def _thread_key(request: LLMRequest) -> str:
    tools = sorted(json.dumps(dict(t), sort_keys=True, default=str) for t in request.tools)
    text = json.dumps([request.system_prompt or "", tools])
    return hashlib.sha256(text.encode()).hexdigest()


class CompactionDetector:
    """Marks the requests of one agent's session that follow a compaction (see the module doc)."""

    def __init__(self) -> None:
        self.compactions = 0
        self._threads: dict[str, Sequence[tuple[str, str, str]]] = {}
        self._main: str | None = None

    def mark(self, request: LLMRequest) -> LLMRequest:
        """``request``, marked ``compacted`` when it starts over its thread's history."""
        if CONTEXT_KEY in request.metadata or request.extra.get("previous_response_id"):
            return request  # the agent marks its own; or a request holding only the new items
        thread = _thread_key(request)
        keys = tuple(_message_key(m) for m in request.messages)
        before = self._threads.get(thread)
        self._threads[thread] = keys
        if self._main is None:
            self._main = thread
        if thread != self._main or before is None or keys[: len(before)] == tuple(before):
            return request
        self.compactions += 1
        metadata: Mapping[str, Any] = {
            **request.metadata, CONTEXT_KEY: "compacted", COMPACTION_KEY: self.compactions
        }  # fmt: skip
        return dataclasses.replace(request, metadata=metadata)
