"""AgentClock: one episode's agent time limit, which need not count the time the policy thinks.

A slow inference server must not truncate episodes, so by default (the "agent" clock) the time
between handing the policy an observation and its answer is not on the clock; the "wall" clock
counts everything since the agent started. One timer is armed at a time: when it fires early
because policy time was paid back, it is pushed back once, not re-armed on every step. A limit
that runs out while the policy is thinking is acted on when the answer arrives.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Literal

#: What a task's agent time limit counts: "agent" (the agent's and sandbox's time, never the time the
#: policy takes to answer) or "wall" (everything since reset).
TimeLimitClock = Literal["agent", "wall"]

_monotonic = time.monotonic


class AgentClock:
    """Calls ``on_expired`` once per episode when its agent has used up ``limit_s`` on this clock.

    ``start`` at the agent's start, ``to_policy`` when an observation is handed to the policy,
    ``from_policy`` with its answer, ``stop`` when the episode ends. Needs a running event loop."""

    __slots__ = (
        "_expired_while_thinking",
        "_limit_s",
        "_on_expired",
        "_paused",
        "_since",
        "_started",
        "_timer",
        "kind",
    )

    def __init__(self, kind: TimeLimitClock, on_expired: Callable[[], None]) -> None:
        if kind not in ("agent", "wall"):
            raise ValueError(f"time_limit_clock must be 'agent' or 'wall', got {kind!r}")
        self.kind: TimeLimitClock = kind
        self._on_expired = on_expired
        self._limit_s = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._started = 0.0  # monotonic time of the agent's start (less what a snapshot had used)
        self._paused = 0.0  # policy time so far
        self._since: float | None = None  # when the policy got the observation it is answering
        self._expired_while_thinking = False

    def start(self, limit_s: float, *, used_s: float = 0.0) -> None:
        """Start a new episode's clock, ``used_s`` of ``limit_s`` already gone (a restored snapshot)."""
        self.stop()
        self._limit_s = limit_s
        self._started, self._paused = _monotonic() - used_s, 0.0
        self._timer = asyncio.get_running_loop().call_later(max(0.0, limit_s - used_s), self._check)

    def to_policy(self) -> None:
        """An observation went to the policy: its thinking time starts."""
        self._since = _monotonic()

    def from_policy(self) -> float | None:
        """The policy answered: the seconds it took (None when it had no observation pending). A
        limit that ran out meanwhile is acted on now."""
        since, thought = self._since, None
        if since is not None:
            thought = _monotonic() - since
            self._since = None
            self._paused += thought
        if self._expired_while_thinking:
            self._expired_while_thinking = False
            self._check()
        return thought

    @property
    def agent_time_s(self) -> float:
        """The time used as of the pending observation, policy time excluded: what a snapshot keeps
        so a restored episode has only the rest of its limit."""
        if self._since is None:
            raise RuntimeError("the agent clock has no observation pending at the policy")
        return self._since - self._started - self._paused

    def stop(self) -> None:
        """The episode ended: disarm the timer and forget the pending observation."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._since, self._expired_while_thinking = None, False

    def _check(self) -> None:
        """The timer fired (or a limit that ran out during the policy's turn is looked at again)."""
        self._timer = None
        if self.kind == "agent":
            if self._since is not None:
                self._expired_while_thinking = True
                return
            left = self._limit_s - (_monotonic() - self._started - self._paused)
            if left > 0:
                self._timer = asyncio.get_running_loop().call_later(left, self._check)
                return
        self._on_expired()
