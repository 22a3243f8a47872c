"""Real local sandboxes whose pid 1 the host SIGKILLs mid-episode, as an operator or the host's OOM
killer would: the fault behind "sandboxes killed" in the refill tests, local and on Ray."""

from __future__ import annotations

import asyncio
import os
import select
import signal
from typing import Any

from ares.sandbox.base import ExecResult, SandboxSpec
from ares.sandbox.local import LocalSandbox


class KilledByHost(LocalSandbox):
    """A real local sandbox whose pid 1 the host SIGKILLs (as an operator or the host's OOM killer
    would) when the agent's first command, the oracle's solve, is about to run."""

    async def exec(self, cmd: str, **kwargs: Any) -> ExecResult:
        if "/solution/solve.sh" in cmd:
            pidfd = os.pidfd_open(self._pids[0])
            try:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                await asyncio.to_thread(select.select, [pidfd], [], [], 30.0)  # readable once it is dead
            finally:
                os.close(pidfd)
        return await super().exec(cmd, **kwargs)


class FaultyFirst:
    """The first ``count`` sandboxes it makes are ``faulty`` ones; every later one is a real sandbox."""

    def __init__(self, count: int, faulty: type[LocalSandbox] = KilledByHost) -> None:
        self.count, self.faulty, self.made = count, faulty, 0

    def __call__(self, spec: SandboxSpec) -> LocalSandbox:
        self.made += 1
        return self.faulty(spec) if self.made <= self.count else LocalSandbox(spec)
