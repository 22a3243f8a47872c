"""The init of a ``LocalSandbox``: launched into its namespaces and cgroups, spoken to, and killed.

``_launch`` forks an init from this process's zygote (or adopts a pre-launched one waiting in its
cgroups, ``prelaunch.py``) and runs the start-up dialogue with it (``startup.py``), attaching the
cgroups while its interpreter starts and the user-mode network when the spec wants one. Every
request then goes over its control socket (``_send``); a broken socket means the init is gone, and
``_mark_crashed`` kills what is left while keeping the files for the verifier. ``_kill_processes``
kills pid 1, whose pid namespace and mounts die with it; ``_release_limits`` undoes what outlives
the processes (the janitor calls it too, at exit). Host services reach in through the init's
namespaces: ``listen_loopback`` opens a socket in its network namespace (``loopback.py``).

A base of ``LocalSandbox`` (``sandbox.py``), which sets every attribute declared here; the methods
tracing wraps (``start``, ``stop``, ``exec``...) stay there: ``StartStopContext`` wraps a class's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ares.errors import SandboxCrashedError, SandboxError, SandboxKilledError
from ares.images.rootfs import RootfsPlan
from ares.sandbox.base import BindMount, SandboxSpec
from ares.sandbox.local import diff, janitor, loopback, prelaunch, seccomp, startup, userns, zygote
from ares.sandbox.local.channel import InitChannel
from ares.sandbox.local.limits import SandboxLimits
from ares.sandbox.local.state import SandboxState

if TYPE_CHECKING:
    from ares.sandbox.local.network import UserNetwork


class InitControl:
    """The sandbox's init process and the channel to it (see the module docstring)."""

    spec: SandboxSpec
    plan: RootfsPlan
    _binds: tuple[BindMount, ...]
    _remove_files: tuple[str, ...]
    _dir: Path | None
    _proc: zygote.InitProcess | None
    _init_log: Path | None
    _init_log_fd: int | None
    _ctl: InitChannel | None
    _pids: list[int]
    _shell: str
    _state: SandboxState
    _limits: SandboxLimits | None
    _ids: userns.IdRange | None
    _network: UserNetwork | None

    async def _seccomp_program(self) -> bytes | None:
        program = seccomp.cached(self.spec.seccomp)
        if program is ...:
            program = await asyncio.to_thread(seccomp.compile_filter, self.spec.seccomp)
        return program

    def _prepare_upper(self) -> None:
        """The workdir and bind targets as real dirs of the (empty) upper, so no component of their
        paths is a symlink the diff below planted."""
        assert self._dir is not None
        for path in (self.spec.workdir, *(b.target for b in self._binds)):
            mount, rel = diff.mount_of(path, self.plan.mounts)
            (self._dir / "upper" / mount.key / rel).mkdir(parents=True, exist_ok=True)

    async def _launch(self, program: bytes | None, waiting: prelaunch.Prelaunched | None = None) -> None:
        """Start an init (or adopt the pre-launched ``waiting``) and configure it."""
        assert self._dir is not None
        self._close_init_log()  # a pre-launched init's, when restarting after a snapshot
        if waiting is None:
            # Forked by this process's zygote (or spawned directly when it cannot be used).
            self._init_log = self._dir / "init.log"
            sock, self._proc = await zygote.start_init(self._init_log)
        else:
            sock, self._proc, self._init_log = waiting.sock, waiting.proc, waiting.log
            self._init_log_fd = waiting.log_fd
        self._ctl = InitChannel(sock)
        self._state.launched()
        self._pids = [self._proc.pid]
        janitor.register(str(id(self)), self._pids, self._dir, self._release_limits)
        # Moving a process into a v1 cgroup waits for an RCU grace period (~10 ms): done while the
        # interpreter starts and mounts; the init forks pid 1 only after "limited", so every process
        # of the sandbox is inside.
        attached = asyncio.ensure_future(asyncio.to_thread(self._attach_cgroups, self._proc.pid))
        try:
            await self._configure(program, attached)
        finally:
            if not attached.done():
                attached.cancel()
                with contextlib.suppress(BaseException):
                    await attached

    async def _configure(self, program: bytes | None, attached: asyncio.Future[None]) -> None:
        """The start-up dialogue with the init (see _init.py's protocol and startup.py)."""
        assert self._dir is not None and self._proc is not None and self._ctl is not None
        assert self._init_log is not None
        dialogue = startup.InitDialogue(self._ctl, self._send, self._init_log)
        config = startup.InitConfig(
            self._dir,
            self.plan,
            self.spec.hostname,
            idmapped=self._ids is not None,
            seccomp=program,
            binds=self._binds,
            remove=self._remove_files,
        )
        fds = await dialogue.unshare(config, self._proc.pid, self._ids)
        try:
            resolv = await self._attach_network(self._proc.pid)
            await dialogue.send_fds(fds)
        finally:
            for fd in fds:
                os.close(fd)
        await dialogue.mapped(resolv)
        await attached
        self._shell = await dialogue.limited(self._pids)

    async def _attach_network(self, pid: int) -> str | None:
        """The user-mode network, if the spec wants one; returns its resolver config."""
        if not self.spec.network:
            return None
        from ares.sandbox.local import network  # pasta/slirp4netns only for sandboxes that want it

        self._network = await network.attach(pid)
        return self._network.resolv_conf

    def _attach_cgroups(self, pid: int) -> None:
        if self._limits is not None:
            self._limits.attach(pid)

    def _close_init_log(self) -> None:
        fd, self._init_log_fd = self._init_log_fd, None
        if fd is not None:
            os.close(fd)

    def _release_limits(self) -> None:
        """Undo what outlives the processes: cgroups, the disk tmpfs, the id range."""
        sandbox_limits, self._limits = self._limits, None
        if sandbox_limits is not None:
            sandbox_limits.release()
        ids, self._ids = self._ids, None
        if ids is not None:
            ids.release()

    async def _kill_processes(self) -> None:
        """Kill pid 1 (its namespace dies with it) and let its parent reap it, then reap the parent."""
        ctl, self._ctl = self._ctl, None
        self._state.halting()
        if ctl is not None:
            ctl.close()
        victims = self._pids[:1] if len(self._pids) > 1 else self._pids
        for pid in victims:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        proc, self._proc = self._proc, None
        if proc is not None:
            await proc.finish(5.0)
        user_network, self._network = self._network, None
        if user_network is not None:
            await user_network.stop()
        self._state.halted()

    def _death(self, message: str) -> SandboxCrashedError:
        """The error for a sandbox whose init died: ``SandboxKilledError`` when nothing inside it can
        have done that. Signals from inside never reach a pid namespace's init, which is not
        dumpable (no ptrace, no /proc/1/mem for commands, which lack CAP_SYS_PTRACE too); the
        syscall filter stops commands from lowering its rlimits (``seccomp.SELF_ONLY``); what is
        left is memory and processes, which cgroups count. Anything less certain stays a crash."""
        filtered = self.spec.seccomp.profile != "unconfined" and not set(self.spec.seccomp.allow) & set(
            seccomp.SELF_ONLY
        )
        if filtered and self._limits is not None and self._limits.counted_every_pressure():
            return SandboxKilledError(f"{message} (killed from outside: no OOM kill or refused fork inside)")
        return SandboxCrashedError(message)

    def _init_alive(self) -> bool:
        """Whether pid 1 still holds its end of the control socket (it closes when pid 1 dies)."""
        return self._ctl is not None and self._ctl.alive()

    async def _mark_crashed(self, reason: str) -> None:
        """The sandbox died or stopped answering: kill what is left but keep its files, so the
        episode can still verify what the agent did (``fork_frozen``) before ``stop()``."""
        self._state.crash(reason)
        await self._kill_processes()

    async def _send(self, data: bytes, fds: Sequence[int] = ()) -> None:
        if self._ctl is None:
            raise SandboxError(self._state.why_not_running("the sandbox is not running"))
        try:
            await self._ctl.send(data, fds)
        except (BrokenPipeError, ConnectionResetError) as exc:
            await self._mark_crashed("the sandbox init process is gone")
            raise self._death(self._state.why_not_running()) from exc

    async def listen_loopback(self, port: int = 0) -> socket.socket:
        """A host-owned TCP socket listening on 127.0.0.1:``port`` in this sandbox's network namespace
        (see ``LoopbackListener`` and ``loopback.py``). A snapshot restarts the sandbox's namespaces:
        listen again after one."""
        loopback.check_port(port)
        if self._state.snapshotting:
            raise SandboxError(
                "cannot listen: the sandbox is being snapshotted; listen after snapshot() returns"
            )
        if not self._state.running or self._proc is None:
            raise SandboxError(f"cannot listen: {self._state.why_not_running()}")
        # The outer init shares pid 1's namespaces and, unlike pid 1, stays dumpable when ARES is
        # unprivileged. It outlives pid 1, whose control socket is still open after the open: so
        # the pid named the init, not a recycled pid.
        net = loopback.open_net_namespace(self._proc.pid)
        try:
            if not self._init_alive():
                raise SandboxError(
                    f"cannot listen: {self._state.why_not_running('the sandbox init is gone')}"
                )
            return await loopback.listen_in(net, port)
        finally:
            os.close(net)
