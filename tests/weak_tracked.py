"""LLM types that accept weak references, so a test can tell whether ARES still holds them."""

from __future__ import annotations

from ares.llm.types import LLMRequest, LLMResponse, Message


class TrackedMessage(Message):
    __slots__ = ("__weakref__",)


class TrackedRequest(LLMRequest):
    __slots__ = ("__weakref__",)


class TrackedResponse(LLMResponse):
    __slots__ = ("__weakref__",)
