"""The sandbox as the agent sees it: the real one, plus a log of the commands it ran.

The environment hands the agent this view so that limit hits reach the episode record and rollout
traces can show each step's commands, whatever agent runs; the verifier keeps the real sandbox.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ares.sandbox.base import ExecResult, Sandbox
from ares.sandbox.capabilities import Capability
from ares.sandbox.forwarding import ForwardingSandbox


@dataclass(frozen=True, slots=True)
class CommandRecord:
    """One command the agent ran, with what it returned."""

    cmd: str
    cwd: str | None
    result: ExecResult

    def to_json(self, *, outputs: bool = True) -> dict[str, Any]:
        data: dict[str, Any] = {
            "cmd": self.cmd,
            "cwd": self.cwd,
            "exit_code": self.result.exit_code,
            "timed_out": self.result.timed_out,
            "limit_hit": self.result.limit_hit,
            "duration_s": self.result.duration_s,
        }
        if outputs:
            data["stdout"], data["stderr"] = self.result.stdout, self.result.stderr
        return data


class CommandLog(ForwardingSandbox, traced=()):
    """The agent's view of ``sandbox``: ``exec`` counts limit hits and logs the command into ``log``.

    It passes on only what an agent may use: a loopback listener (for an agent inside that calls the
    LLM proxy). The verifier's forks, halts and snapshots stay with the environment, which holds the
    real sandbox. Not traced: the sandbox behind it traces each command once (a second span and
    wrapper per command would cost every step for nothing)."""

    passes = frozenset({Capability.LOOPBACK})

    def __init__(self, sandbox: Sandbox, hits: Counter[str], log: list[CommandRecord] | None) -> None:
        self._sandbox = sandbox
        self._hits = hits
        self._log = log

    def target(self) -> Sandbox:
        return self._sandbox

    async def exec(
        self,
        cmd: str,
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        result = await self._sandbox.exec(cmd, cwd=cwd, env=env, timeout_s=timeout_s, stdin=stdin)
        if self._log is not None:  # None: nobody reads the commands (no traces)
            self._log.append(CommandRecord(cmd, cwd, result))
        if result.limit_hit is not None:
            self._hits[result.limit_hit] += 1
        return result
