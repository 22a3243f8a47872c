"""Preempting the calls in flight at a weight update: ``pause(preempt=True)`` cancels them, returns
once they have stopped, and after ``resume()`` each is re-issued and its step answered once; a
resumable policy continues from the tokens it kept, the record saying which version made which; the
paused time is not counted against ``policy_timeout_s``. Real HumanEval episodes in local sandboxes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ares.llm.token_versions import VERSION_SEGMENTS_KEY
from ares.llm.types import LLMRequest, LLMResponse, user
from ares.policies import make_policy
from ares.policies.resuming import KeepTokens, KeptTokens, ResumablePolicy, TokenChunk
from ares.records.collectors import MemoryCollector
from ares.records.exports.turns import turns
from ares.rollout import RunSpec
from ares.rollout.pause import PolicyGate
from ares.rollout.preemption import PREEMPTED_KEY, answer

#: Tokens the typist's first attempt at an episode's first answer types before it stalls.
STALL = 5


class Typist:
    """A ResumablePolicy over the oracle: it types the oracle's answer one character per loop turn
    (token id = code point, logprob ``-(version + 1) / 10``, the version read when the attempt
    starts). Its first attempt at an episode's first answer stalls after ``STALL`` tokens until it
    is cancelled. Answers are kept per step, so a re-issue answers the same step again."""

    def __init__(self, oracle: Any, state: dict[str, Any]) -> None:
        self.oracle, self.state, self.answers = oracle, state, dict[int, str]()
        self.attempts = 0

    async def act(self, observation: LLMRequest) -> LLMResponse:
        return await self.act_resuming(observation, KeptTokens(), lambda chunk: None)

    async def act_resuming(self, observation: LLMRequest, kept: KeptTokens, keep: KeepTokens) -> LLMResponse:
        step = len(observation.messages)
        if step not in self.answers:
            self.answers[step] = (await self.oracle.act(observation)).content
        text, version = self.answers[step], self.state["version"]
        self.attempts += 1
        stall = self.attempts == 1
        ids, logprobs = list(kept.token_ids), list(kept.logprobs)
        typed: list[int] = []
        try:
            for char in text[len(ids) :]:
                if stall and len(typed) == STALL:
                    self.state["stalled"].set()
                    await asyncio.Event().wait()  # until preempted
                await asyncio.sleep(0)
                typed.append(ord(char))
        except asyncio.CancelledError:
            keep(TokenChunk(tuple(typed), tuple([-(version + 1) / 10] * len(typed)), version))
            raise
        ids += typed
        logprobs += [-(version + 1) / 10] * len(typed)
        return LLMResponse(text, token_ids=tuple(ids), logprobs=tuple(logprobs), policy_version=version)


def test_a_resumable_call_keeps_its_tokens_and_the_pause_is_not_on_its_clock() -> None:
    gate = PolicyGate()
    state: dict[str, Any] = {"version": 0, "stalled": asyncio.Event(), "typists": []}
    timeout_s = 2.0

    def factory(task: Any, action_format: Any) -> Any:
        typist = Typist(make_policy("oracle")(task, action_format), state)
        state["typists"].append(typist)
        return typist

    async def main() -> tuple[list[Any], list[Any]]:
        state["stalled"] = asyncio.Event()
        spec = RunSpec.load("humaneval", tasks="0:1", concurrency=1, gate=gate, policy_timeout_s=timeout_s)
        collector = MemoryCollector()
        run = asyncio.create_task(spec.play(factory, collector=collector))
        await state["stalled"].wait()
        await gate.pause(preempt=True)  # the stalled attempt is cancelled and has handed over its tokens
        assert gate.in_flight == 0 and gate.preemptions == 1
        state["version"] = 1  # the "weight update"
        await asyncio.sleep(timeout_s * 1.25)  # paused for longer than policy_timeout_s
        gate.resume()
        return await run, collector.take()

    assert isinstance(Typist(None, state), ResumablePolicy)
    results, episodes = asyncio.run(main())
    (result,) = results
    assert result.status.value == "finished" and result.reward == 1.0  # not timed out, nothing lost
    (typist,) = state["typists"]
    first, second = (turn.response for turn in turns(episodes[0]))
    assert typist.attempts == 3  # the first answer twice (preempted, then resumed), the second once
    text = typist.answers[min(typist.answers)]
    assert first.content == text and first.token_ids == tuple(map(ord, text))  # answered once, whole
    assert first.logprobs == (-0.1,) * STALL + (-0.2,) * (len(text) - STALL)  # as each version sampled
    assert first.policy_version == 1  # the version that finished it
    assert first.extra[VERSION_SEGMENTS_KEY] == [[0, STALL, 0], [STALL, len(text), 1]]
    assert first.extra[PREEMPTED_KEY] == {"times": 1, "kept_tokens": STALL}
    assert second.policy_version == 1 and PREEMPTED_KEY not in second.extra
    # The pause is not the policy's time: its latency leaves it out, the call's span holds it.
    call = episodes[0].steps[1].call
    assert call is not None and call.answered_at - call.asked_at >= timeout_s * 1.25
    assert result.policy_latencies_s[0] < timeout_s * 1.25 <= call.answered_at - call.asked_at


class StallingOracle:
    """The oracle, except that the first attempt at each episode's first answer waits until it is
    cancelled; counts what reached the policy and what was cancelled."""

    def __init__(self, oracle: Any, state: dict[str, Any]) -> None:
        self.oracle, self.state, self.answers = oracle, state, dict[int, LLMResponse]()

    async def act(self, observation: LLMRequest) -> LLMResponse:
        step = len(observation.messages)
        if step not in self.answers:
            self.answers[step] = await self.oracle.act(observation)
            if not self.state["stalled"]:
                try:
                    self.state["waiting"] += 1
                    if self.state["waiting"] == 2:
                        self.state["both"].set()
                    await asyncio.Event().wait()  # until preempted
                finally:
                    self.state["waiting"] -= 1
                    self.state["cancelled"] += 1
        return self.answers[step]


def test_a_preempted_call_is_reissued_from_scratch_and_answered_once() -> None:
    gate = PolicyGate()
    state: dict[str, Any] = {"stalled": False, "waiting": 0, "cancelled": 0, "both": asyncio.Event()}

    def factory(task: Any, action_format: Any) -> Any:
        return StallingOracle(make_policy("oracle")(task, action_format), state)

    async def main() -> tuple[list[Any], list[Any]]:
        spec = RunSpec.load("humaneval", tasks="0:2", concurrency=2, gate=gate)
        collector = MemoryCollector()
        run = asyncio.create_task(spec.play(factory, collector=collector))
        await state["both"].wait()  # both episodes' first calls are under way
        await gate.pause(preempt=True)
        assert state["cancelled"] == 2 and gate.in_flight == 0  # stopped before pause() returned
        state["stalled"] = True
        gate.resume()
        return await run, collector.take()

    results, episodes = asyncio.run(main())
    assert all(r.status.value == "finished" and r.reward == 1.0 for r in results)
    assert gate.preemptions == 2
    for episode in episodes:
        answers = [turn.response for turn in turns(episode)]
        assert len(answers) == len(episode.steps) - 1 == 2  # each step answered once
        assert answers[0].extra[PREEMPTED_KEY] == {"times": 1, "kept_tokens": 0}
        assert VERSION_SEGMENTS_KEY not in answers[0].extra and PREEMPTED_KEY not in answers[1].extra


async def test_a_cancelled_caller_cancels_its_attempt_and_a_preempted_one_waits_for_resume() -> None:
    gate = PolicyGate()
    started, ended = asyncio.Event(), list[str]()

    class Slow:
        async def act(self, observation: LLMRequest) -> LLMResponse:
            started.set()
            try:
                await asyncio.Event().wait()
            finally:
                ended.append("attempt")
            raise AssertionError("unreachable")

    async def ask() -> Any:
        async with gate.call():
            return await answer(Slow(), LLMRequest(messages=(user("hi"),)), None, gate)

    caller = asyncio.create_task(ask())
    await started.wait()
    await gate.pause(preempt=True)
    assert ended == ["attempt"] and gate.in_flight == 0 and gate.held == 1 and not caller.done()
    caller.cancel()  # the run is cancelled while the call waits for resume()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert gate.held == 0 and gate.in_flight == 0
    gate.resume()
    started.clear()
    caller = asyncio.create_task(ask())
    await started.wait()
    caller.cancel()  # cancelled while its attempt runs: the attempt is cancelled with it
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert ended == ["attempt", "attempt"] and gate.in_flight == 0
