"""Policies that keep what they sampled when a weight update preempts them, and go on from it.

A trainer that preempts the calls in flight (``PolicyGate.pause(preempt=True)``) re-issues each of
them after the update. A plain policy then answers again from scratch. A ``ResumablePolicy`` hands
over the tokens it had sampled when it was cancelled and, re-issued, continues the same completion
from them with the new weights: no sampled token is thrown away, and the answer's tokens and
logprobs are exactly what each version sampled (its version segments say which made which).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ares.llm.token_versions import Segment, merged
from ares.llm.types import LLMRequest, LLMResponse


@dataclass(frozen=True, slots=True)
class TokenChunk:
    """Tokens one version of the weights sampled for an answer, with their logprobs (of the
    distribution each was drawn from)."""

    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    version: int | None

    def __post_init__(self) -> None:
        if len(self.logprobs) != len(self.token_ids):
            raise ValueError(f"{len(self.logprobs)} logprobs for {len(self.token_ids)} tokens")


@dataclass(frozen=True, slots=True)
class KeptTokens:
    """What the preempted attempts at one answer sampled, in order: the answer starts with it."""

    chunks: tuple[TokenChunk, ...] = ()

    @property
    def token_ids(self) -> tuple[int, ...]:
        return tuple(t for chunk in self.chunks for t in chunk.token_ids)

    @property
    def logprobs(self) -> tuple[float, ...]:
        return tuple(lp for chunk in self.chunks for lp in chunk.logprobs)

    def __len__(self) -> int:
        return sum(len(chunk.token_ids) for chunk in self.chunks)

    def plus(self, chunks: tuple[TokenChunk, ...]) -> KeptTokens:
        return KeptTokens(self.chunks + tuple(c for c in chunks if c.token_ids))

    def segments(self) -> tuple[Segment, ...]:
        """``(start, end, version)`` over the kept tokens."""
        spans, at = [], 0
        for chunk in self.chunks:
            spans.append((at, at + len(chunk.token_ids), chunk.version))
            at += len(chunk.token_ids)
        return merged(spans)


#: Where a cancelled attempt hands the tokens it sampled (called at most once, before it ends).
KeepTokens = Callable[[TokenChunk], None]


@runtime_checkable
class ResumablePolicy(Protocol):
    """A policy that can continue a completion it was preempted in (``TransformersPolicy`` can)."""

    async def act(self, observation: LLMRequest) -> LLMResponse: ...

    async def act_resuming(self, observation: LLMRequest, kept: KeptTokens, keep: KeepTokens) -> LLMResponse:
        """Answer ``observation`` with a completion whose first tokens are ``kept``'s (sampled by
        attempts a weight update preempted): generate only the rest, with the current weights. The
        answer's ``token_ids``/``logprobs`` are kept's followed by the new ones; its
        ``policy_version`` is the current version. Cancelled, hand the tokens this attempt sampled
        to ``keep``, and end only once generation has stopped (the weights are about to change)."""
        ...
