"""One policy call that a weight update may preempt: cancelled, re-issued after it, answered once.

``PolicyGate.pause(preempt=True)`` cancels the calls under way. Each is re-issued after
``resume()``, so its episode loses nothing and its step is answered exactly once: a plain policy
answers again from scratch (the cancelled attempt's tokens never reach the agent), a
``ResumablePolicy`` continues from the tokens it had sampled (``ares.policies.resuming``). The
answer records it: ``extra["ares_preempted"]`` (how often, how many tokens were kept), and where
its tokens come from more than one version, their segments (``ares.llm.token_versions``).

``policy_timeout_s`` bounds the policy's own work on the answer: the paused time never counts, nor
does an attempt whose work was thrown away (a re-issue from scratch gets the whole budget again);
the attempts whose tokens the answer keeps count.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from dataclasses import replace
from typing import Any

from ares.errors import PolicyError
from ares.llm.token_versions import VERSION_SEGMENTS_KEY, merged
from ares.llm.types import LLMRequest, LLMResponse
from ares.policies.resuming import KeptTokens, ResumablePolicy, TokenChunk
from ares.rollout.pause import GateCall, PolicyGate

#: The ``LLMResponse.extra`` key of an answer whose call was preempted: ``{"times": n, "kept_tokens": k}``.
PREEMPTED_KEY = "ares_preempted"


async def answer(
    policy: Any, observation: LLMRequest, timeout_s: float | None, gate: PolicyGate | None
) -> Any:
    """``policy``'s answer to ``observation`` within ``timeout_s`` of its work (TimeoutError past
    it), re-issued as often as a pause preempts it when made through ``gate.call()``."""
    call = None if gate is None else gate.current_call()
    if gate is None or call is None:
        return await asyncio.wait_for(policy.act(observation), timeout_s)
    resumable = isinstance(policy, ResumablePolicy)
    kept, left, preempted = KeptTokens(), timeout_s, 0
    while True:
        if call.preempted:  # preempted before it started, or its attempt was: wait for resume()
            await gate.park()
        chunks: list[TokenChunk] = []
        work = policy.act_resuming(observation, kept, chunks.append) if resumable else policy.act(observation)
        started = time.perf_counter()
        done, response = await _attempt(call, work, left)
        if done:
            return _recorded(response, kept, preempted)
        preempted += 1
        if chunks:  # kept: the time that sampled them counts
            kept = kept.plus(tuple(chunks))
            left = None if left is None else max(0.0, left - (time.perf_counter() - started))


async def _attempt(call: GateCall, work: Awaitable[Any], timeout_s: float | None) -> tuple[bool, Any]:
    """Run one attempt as ``call``'s (so a pause can cancel it): (True, its answer), or (False,
    None) when it was preempted; TimeoutError past ``timeout_s``; a cancellation of the caller
    cancels it too."""
    attempt = asyncio.ensure_future(work)
    call.attempt = attempt
    try:
        done, _ = await asyncio.wait({attempt}, timeout=timeout_s)
    except asyncio.CancelledError:
        attempt.cancel()
        await asyncio.wait({attempt})
        raise
    finally:
        call.attempt = None
    if not done:
        attempt.cancel()
        await asyncio.wait({attempt})
        raise TimeoutError
    if attempt.cancelled():
        if call.preempted:
            return False, None
        raise asyncio.CancelledError("the policy's call was cancelled")
    return True, attempt.result()


def _recorded(response: Any, kept: KeptTokens, preempted: int) -> Any:
    """The answer with its preemptions on record; a continuation must start with the kept tokens."""
    if not preempted or not isinstance(response, LLMResponse):
        return response
    extra = {**response.extra, PREEMPTED_KEY: {"times": preempted, "kept_tokens": len(kept)}}
    if kept.chunks:
        ids, logprobs = response.token_ids or (), response.logprobs or ()
        n = len(kept)
        if tuple(ids[:n]) != kept.token_ids or tuple(logprobs[:n]) != kept.logprobs:
            raise PolicyError(
                f"the resumed answer does not start with the {n} tokens (and logprobs) its preempted "
                "attempts sampled: act_resuming must return kept's tokens followed by the new ones"
            )
        segments = merged((*kept.segments(), (n, len(ids), response.policy_version)))
        if len(segments) > 1:
            extra[VERSION_SEGMENTS_KEY] = [list(segment) for segment in segments]
    return replace(response, extra=extra)
