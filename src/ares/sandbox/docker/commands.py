"""How ``DockerSandbox.exec`` drives one command, apart from starting it and reading its result.

The wrapper's command line (``cmd`` under the shell wrapper, or an exact ``argv`` under a verifier
fork's trusted shell), stdin passed as a file, and the wait: the in-container ``timeout`` kills the
command; past its timeout plus ``KILL_MARGIN_S`` the host sweeps its processes itself, and a command
that survives even that takes the sandbox with it. A wrapper that died without its trailer leaves the
exit code to the engine, once it is clear the container itself is still alive.

A base of ``DockerSandbox`` (``sandbox.py``), whose ``exec`` stays there so that tracing wraps it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from ares.errors import SandboxCrashedError, SandboxError
from ares.sandbox.docker.client import run_blocking
from ares.sandbox.docker.container_calls import ContainerCalls
from ares.sandbox.docker.execution import ExecStream, stdin_archive, sweep, trusted_wrapper_argv, wrapper_argv

#: After a command's own timeout, how long until the host stops waiting and kills it itself.
KILL_MARGIN_S = 2.0
SWEEP_TIMEOUT_S = 30.0


class ContainerCommands(ContainerCalls):
    """The command plumbing under ``DockerSandbox.exec`` (see the module docstring)."""

    async def _wrapped_command(
        self,
        container: str,
        token: str,
        cmd: str,
        workdir: str,
        timeout_s: float | None,
        stdin: bytes | None,
        argv: Sequence[str] | None,
    ) -> list[str]:
        """The command line that runs ``cmd`` (or exactly ``argv``) under its exec wrapper."""
        if argv is not None:
            if self._trusted is None:
                raise SandboxError("exec(argv=...) needs a verifier fork with a trusted shell")
            if stdin is not None or not argv or not argv[0].startswith("/"):
                raise SandboxError("exec(argv=...) takes an absolute program path first and no stdin")
            shell = self._trusted.argv()
            return trusted_wrapper_argv(shell, token, self._trusted.scratch, workdir, timeout_s, argv)
        if stdin is not None:
            await self._put_stdin(container, token, stdin)
        return wrapper_argv(token, workdir, timeout_s, cmd)

    async def _wait_or_kill(
        self,
        stream: ExecStream,
        container: str,
        token: str,
        cmd: str,
        timeout_s: float | None,
        started: float,
    ) -> None:
        """Wait for the command's output to end; past its timeout, kill it from the host, and remove
        the sandbox (SandboxCrashedError) if even that does not end it."""
        deadline = None if timeout_s is None else started + timeout_s + KILL_MARGIN_S
        if not await run_blocking(stream.read_until, deadline):
            await self._sweep(container, token)  # the in-container timeout did not do it
            grace = self._engine.config.exec_grace_s
            if not await run_blocking(stream.read_until, time.monotonic() + grace):
                raise await self._crash(
                    f"a command outlived its {timeout_s:g}s timeout and could not be killed; the "
                    f"sandbox was removed. Command: {cmd[:200]!r}"
                )

    async def _exit_code_without_trailer(self, exec_id: str, cmd: str) -> int:
        """The wrapper itself died: find out whether the whole container went with it."""
        if self._container is None or self._client is None:  # a concurrent call found it dead
            raise SandboxCrashedError(self._gone or "the sandbox was stopped while a command ran")
        info = await self._api("inspect the sandbox", self._client.api.inspect_container, self._container)
        state = info["State"]
        if not state.get("Running"):
            why = " (OOM-killed: the memory limit is too small)" if state.get("OOMKilled") else ""
            raise await self._crash(f"the sandbox container died{why} while running {cmd[:200]!r}")
        status = await self._api("inspect a command", self._client.api.exec_inspect, exec_id)
        code = status.get("ExitCode")
        return int(code) if code is not None else -1

    async def _sweep(self, container: str, token: str) -> None:
        """Kill every process still carrying this command's token (see ``execution.sweep``)."""
        assert self._client is not None
        trusted = None if self._trusted is None else self._trusted.argv()
        await sweep(self._client.api, container, token, trusted, SWEEP_TIMEOUT_S)

    async def _put_stdin(self, container: str, token: str, data: bytes) -> None:
        assert self._client is not None
        directory, archive = await asyncio.to_thread(stdin_archive, token, data)
        await self._api("pass stdin", self._client.api.put_archive, container, directory, archive)
