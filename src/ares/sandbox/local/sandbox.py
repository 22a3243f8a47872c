"""LocalSandbox: the embedded default backend (namespaces + overlayfs, no daemon).

The host starts ``_init.py`` with the current interpreter; it enters new user, mount, pid, ipc, uts,
cgroup and network namespaces, mounts the overlay root and becomes pid 1. Run as root, sandbox root is
an unprivileged host id range (``userns``) and the image layers are idmapped clones; unprivileged, it
is the invoking user. Commands are sent over a SOCK_SEQPACKET socket with a per-command reply socket
passed along, so concurrent ``exec`` calls never share a stream. Killing pid 1 tears the whole sandbox
down: every process in its pid namespace dies and its mounts vanish with its mount namespace.

This module is the lifecycle, the forks and the commands (tracing wraps only a class's own methods);
two bases of the class hold the init's launch, control and death (``init_control.py``) and the
snapshot methods (``sandbox_snapshots.py``). The rest lives by concept: the wire protocol
(``channel.py``), the start-up dialogue (``startup.py``), inits waiting in their cgroups
(``prelaunch.py``), the states and who may change them
(``state.py``), the image and snapshot layers (``stack.py``, ``snapshot.py``, ``archive.py``),
verifier forks (``forks.py``), the trusted-shell cache (``shells.py``), the builder's commit
(``commit.py``) and file transfers (``transfer.py``).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ares.errors import SandboxCrashedError, SandboxError, SandboxTimeoutError
from ares.images.config import ImageConfig
from ares.images.rootfs import RootfsPlan
from ares.sandbox import trusted_shell
from ares.sandbox.base import (
    IMAGE_WORKDIR,
    BindMount,
    DiffSummary,
    ExecResult,
    FileMap,
    Resources,
    SandboxSpec,
)
from ares.sandbox.capabilities import Capability
from ares.sandbox.lifecycle import StartStopContext
from ares.sandbox.local import (
    commit,
    forks,
    janitor,
    limits,
    prelaunch,
    shells,
    startup,
    transfer,
    userns,
    workspace,
    zygote,
)
from ares.sandbox.local import snapshot as local_snapshot
from ares.sandbox.local.channel import ExecRequest, InitChannel, Reply
from ares.sandbox.local.limits import LimitMode, LimitsReport, SandboxLimits
from ares.sandbox.local.sandbox_snapshots import LocalSnapshots
from ares.sandbox.local.stack import LayerStack, addon_program_mib, resolve_image
from ares.sandbox.local.state import SandboxState

if TYPE_CHECKING:
    from ares.sandbox.local.network import UserNetwork

DEFAULT_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
    "LANG": "C.UTF-8",
    "TERM": "dumb",
}
START_TIMEOUT_S = 30.0
# How long past a command's own timeout we wait before declaring the sandbox unresponsive.
EXEC_GRACE_S = 30.0
KILLED_FROM_INSIDE = "ares sandbox: the command's supervisor was killed from inside the sandbox\n"


@dataclass(frozen=True, slots=True)
class VerifierFork:
    """A sandbox for a task's tests, and what the agent changed outside the task's outputs."""

    sandbox: LocalSandbox
    outside: DiffSummary


class LocalSandbox(LocalSnapshots, StartStopContext):
    """A sandbox on this machine. Create it, ``await start()``, ``exec`` commands, ``await stop()``."""

    #: The class is its own factory, so it declares ``RESTORE`` (classmethods) beside its sandboxes'.
    capabilities = frozenset({
        Capability.VERIFIER_FORK, Capability.FROZEN_FORK, Capability.SNAPSHOT, Capability.RESTORE,
        Capability.LOOPBACK,
    })  # fmt: skip

    def __init__(
        self,
        spec: SandboxSpec | None = None,
        *,
        plan: RootfsPlan | None = None,
        image_config: ImageConfig | None = None,
        scratch_dir: Path | None = None,
        limit_mode: LimitMode | None = None,
        default_resources: Resources = limits.DEFAULT_RESOURCES,
        output_limit: int | None = limits.DEFAULT_OUTPUT_BYTES,
        binds: Sequence[BindMount] = (),
        remove_files: Sequence[str] = (),
    ) -> None:
        """``plan``/``image_config`` pin the filesystem and defaults (otherwise ``spec.image`` is
        resolved, building a Dockerfile on first use); ``scratch_dir`` is where the sandbox's upper
        dirs live (the image builder keeps them on the cache's filesystem to commit them as layers);
        ``limit_mode="rlimit"`` (or ``$ARES_SANDBOX_LIMITS=rlimit``) enforces limits with rlimits only,
        as for an unprivileged user. ``default_resources`` fill what ``spec.resources`` leaves unset
        (``Resources()`` for none); ``output_limit`` bounds each output stream of ``exec`` (bytes);
        ``binds`` show host directories inside (the verifier's tests and reward dir);
        ``remove_files`` are deleted from the sandbox's view before its first command (start-up hooks
        the verifier must not honour)."""
        self.spec = spec or SandboxSpec()
        self._image_config = image_config or ImageConfig()
        self._scratch_dir = scratch_dir
        self._default_resources = default_resources
        self._output_limit = output_limit
        self._binds = tuple(startup.checked_bind(b) for b in binds)
        self._remove_files = tuple(remove_files)
        self._dir: Path | None = None
        self._proc: zygote.InitProcess | None = None
        self._init_log: Path | None = None
        self._init_log_fd: int | None = None  # a pre-launched init's log (a memfd), closed on stop
        self._ctl: InitChannel | None = None
        self._pids: list[int] = []
        self._shell = "/bin/sh"
        self._state = SandboxState()
        self._limit_mode = limits.resolve_mode(limit_mode)
        self._limits: SandboxLimits | None = None
        self._limits_report: LimitsReport | None = None
        self._ids: userns.IdRange | None = None
        self._network: UserNetwork | None = None
        self._stack = LayerStack(plan)  # the image, and the snapshot layers on it (see stack.py)

    # ------------------------------------------------------------------ lifecycle
    @property
    def running(self) -> bool:
        return self._state.running

    @property
    def crashed(self) -> str | None:
        """Why the sandbox died on its own (None while it runs or after a plain ``stop()``)."""
        return self._state.crashed

    @property
    def diff_dir(self) -> Path:
        """The sandbox's filesystem diff against its image (one upper dir per overlay mount)."""
        if self._dir is None:
            raise SandboxError("the sandbox has not been started")
        return self._dir / "upper"

    @property
    def limits(self) -> LimitsReport:
        """How each limit is enforced (cgroup, rlimit, tmpfs or not at all), and why."""
        if self._limits_report is None:
            raise SandboxError("the sandbox has not been started")
        return self._limits_report

    @property
    def host_pid(self) -> int:
        """The host pid of the sandbox's pid 1 (read its /proc entries from the host side)."""
        if not self._pids:
            raise SandboxError("the sandbox is not running")
        return self._pids[0]

    @property
    def host_ids(self) -> tuple[int, int]:
        """(first host id, count) that sandbox ids 0.. map to."""
        if self._ids is not None:
            return self._ids.first, self._ids.size
        return os.geteuid(), 1

    @property
    def plan(self) -> RootfsPlan:
        if self._stack.plan is None:
            raise SandboxError("the sandbox has not been started")
        return self._stack.plan

    async def start(self) -> None:
        if self._state.running:
            raise SandboxError("the sandbox is already running")
        self._state.starting()
        resolved = None
        if self._stack.plan is None:
            resolved, self._image_config, self.image_identity = await resolve_image(
                self.spec.image, self.spec.addons
            )
        if self.spec.workdir == IMAGE_WORKDIR:  # the image's own working dir, now that it is known
            self.spec = replace(self.spec, workdir=self._image_config.workdir or "/")
        self._stack.pin(resolved)
        program = await self._seccomp_program()
        resources = limits.with_defaults(self.spec.resources, self._default_resources)
        if limits.requested(resources):
            mapped = await addon_program_mib(self.spec.addons) if self.spec.addons else 0
            self._limits = SandboxLimits(
                resources, self._limit_mode, task_set=self.spec.resources, mapped_mb=mapped
            )
        prepare = None if self._limits is None else self._limits.mount_storage
        try:
            if self._stack.restore is not None:  # the image plus the snapshot's layers, held from now on
                local_snapshot.attach(self._stack, self.spec.image)
            self._dir = workspace.new_sandbox_dir(self.plan, self._scratch_dir, prepare)
        except BaseException:
            await self.stop()
            raise
        self._prepare_upper()
        waiting: prelaunch.Prelaunched | None = None
        try:
            if userns.root_mapped():
                self._ids = await asyncio.to_thread(userns.allocate)
            if self._limits is not None:
                # An init already in cgroups of its own, if one waits: its cgroups get these limits.
                waiting = prelaunch.take() if self._limits.mode == "auto" else None
                prepared = None if waiting is None else waiting.cgroups
                await asyncio.to_thread(self._limits.setup, self._dir, prepared)
            self._limits_report = self._limits.report if self._limits is not None else LimitsReport()
            await asyncio.wait_for(self._launch(program, waiting), START_TIMEOUT_S)
        except BaseException as exc:
            if waiting is not None and self._proc is None:  # taken but never launched
                await asyncio.to_thread(waiting.discard)
            await self.stop()
            if isinstance(exc, TimeoutError):
                raise SandboxError(f"the sandbox did not start within {START_TIMEOUT_S:.0f}s") from exc
            raise

    async def _restart(self) -> None:
        """A fresh init on ``self.plan`` in this sandbox's dir, limits, ids and network, after a
        snapshot replaced the upper dirs (the processes are dead)."""
        self._state.starting()
        self._prepare_upper()
        try:
            await asyncio.wait_for(self._launch(await self._seccomp_program()), START_TIMEOUT_S)
        except BaseException as exc:
            await self._mark_crashed(f"the sandbox did not restart after a snapshot: {exc}")
            if isinstance(exc, Exception):
                raise SandboxCrashedError(self._state.why_not_running()) from exc
            raise

    async def stop(self) -> None:
        """Kill every process of the sandbox and delete its files. Safe to call twice."""
        await self._kill_processes()
        janitor.unregister(str(id(self)))
        self._pids = []
        await asyncio.to_thread(self._release_limits)
        path, self._dir = self._dir, None
        if path is not None:
            await asyncio.to_thread(janitor.remove_tree, path)
        self._init_log = None
        self._close_init_log()
        held = self._stack.reset()  # a later start() begins from the image (or its snapshot)
        if held:
            await asyncio.to_thread(local_snapshot.release, held, self._stack.owner)

    async def fork_frozen(self) -> LocalSandbox:
        """Kill every process here and return a new, unstarted sandbox of this image plus this diff.

        Used by the verifier so that nothing the agent left running can touch the reward; works on a
        crashed sandbox too (its files stay until ``stop()``, which must come after the fork has
        stopped).
        """
        if self._dir is None or self._stack.plan is None:
            raise SandboxError("the sandbox has not been started")
        await self._kill_processes()
        return self._sibling(self._stack.plan.stacked_on(self._dir / "upper"))

    def _sibling(
        self,
        plan: RootfsPlan,
        binds: Sequence[BindMount] = (),
        remove_files: Sequence[str] = (),
        spec: SandboxSpec | None = None,
    ) -> LocalSandbox:
        """An unstarted sandbox with this one's spec (or ``spec``) and settings on ``plan``."""
        sibling = LocalSandbox(
            spec or self.spec,
            plan=plan,
            image_config=self._image_config,
            limit_mode=self._limit_mode,
            default_resources=self._default_resources,
            output_limit=self._output_limit,
            binds=binds,
            remove_files=remove_files,
        )
        sibling._stack.sealed = "a frozen or verifier fork cannot be snapshotted; snapshot the sandbox itself"
        return sibling

    async def fork_verifier(
        self,
        *,
        outputs: Sequence[str] | None,
        binds: Sequence[BindMount] = (),
        drop: Callable[[str], bool] | None = None,
    ) -> VerifierFork:
        """Kill every process here and return an unstarted sandbox for a task's tests, with ``binds``.

        Its filesystem is the pristine image plus only ``outputs`` (absolute paths) carried over from
        this diff, so tools, interpreters, site dirs and start-up hooks the agent changed elsewhere do
        not reach the tests; ``outputs=None`` stacks the whole diff (for tasks whose success is system
        state). Either way the fork says what changed outside ``outputs`` (or the workdir). This
        sandbox's files stay until its ``stop()``, which must come after the fork's.

        ``drop`` (outputs mode only) names carried paths (absolute) to leave out: the image's own
        version of each shows through instead, e.g. a SWE task's ``/testbed/.git``.
        """
        if self._dir is None or self._stack.plan is None:
            raise SandboxError("the sandbox has not been started")
        await self._kill_processes()
        plan, outside = await forks.verifier_plan(self._dir, self._stack, outputs, self.spec.workdir, drop)
        return VerifierFork(self._sibling(plan, binds, trusted_shell.IGNORED_HOOKS), outside)

    async def trusted_shell(self) -> tuple[Path, trusted_shell.ShellBundle] | None:
        """The image's own bash, captured once per image and process from a pristine sandbox into a
        host dir that a verifier fork binds at ``trusted_shell.SHELL_DIR`` (None: no bash)."""
        if self._stack.plan is None:
            raise SandboxError("the sandbox has not been started")
        plan = self._stack.image or self._stack.plan  # never an agent's snapshot layer
        return await shells.image_shell(
            plan, lambda: self._sibling(plan, spec=replace(self.spec, network=False))
        )

    def host_dir(self, name: str) -> Path:
        """A new empty host directory that lives (and is deleted) with this sandbox: a bind source
        for a fork, on the filesystem the sandbox's mounts already use."""
        if self._dir is None:
            raise SandboxError("the sandbox has not been started")
        return forks.new_host_dir(self._dir, name)

    async def commit(self, dest: Path) -> None:
        """Kill every process, move the diff to ``dest`` (same filesystem) as an image layer, and stop
        (see commit.py)."""
        if self._dir is None:
            raise SandboxError("the sandbox has not been started")
        await self._kill_processes()
        upper, mounts = self._dir / "upper", self.plan.mounts
        await asyncio.to_thread(commit.move_diff, upper, self._stack.layers, mounts, dest)
        await self.stop()

    # ------------------------------------------------------------------ commands
    async def exec(
        self,
        cmd: str,
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
        stdin: bytes | None = None,
        user: str | None = None,
        argv: Sequence[str] | None = None,
    ) -> ExecResult:
        """Run ``cmd`` with bash; ``user`` (``name[:group]`` or ids) overrides the image's USER.

        ``argv`` (an absolute program path first) is run exactly instead, with no shell and no PATH
        lookup; ``cmd`` then only names it in errors."""
        sandbox_limits = self._limits
        before = (0, 0) if sandbox_limits is None else sandbox_limits.counters()
        reply = await self._run(
            cmd,
            argv=argv,
            cwd=cwd,
            env=env,
            timeout_s=timeout_s,
            stdin=stdin,
            user=user,
            output_limit=self._output_limit,
        )
        result = reply.result()
        hit = None
        if sandbox_limits is not None:
            hit = sandbox_limits.limit_hit(before, result.exit_code, result.timed_out, result.stderr)
        if hit is None and reply.output_dropped:
            hit = "output"
        return replace(result, limit_hit=hit)

    async def _run(
        self,
        cmd: str,
        *,
        argv: Sequence[str] | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
        stdin: bytes | None = None,
        user: str | None = None,
        output_limit: int | None = None,
    ) -> Reply:
        request = ExecRequest(
            cmd=cmd,
            argv=None if argv is None else list(argv),
            cwd=cwd or self.spec.workdir,
            env={**DEFAULT_ENV, **self._image_config.env, **self.spec.env, **(env or {})},
            timeout=timeout_s,
            user=user if user is not None else self._image_config.user,
            output_limit=output_limit,
            limits=self._limits.request_fields if self._limits is not None else {},
        )
        with self._state.running_command():
            return await self._request(request, stdin)

    async def _request(self, request: ExecRequest, stdin: bytes | None) -> Reply:
        """Run ``request`` in a shepherd; no answer within its timeout plus a grace is a crash."""
        limit = None if request.timeout is None else request.timeout + EXEC_GRACE_S
        try:
            frame = await InitChannel.exchange(self._send, InitChannel.encode_request(request), stdin, limit)
        except TimeoutError as exc:
            await self._mark_crashed(f"the sandbox did not answer within {limit}s; it was stopped")
            raise SandboxTimeoutError(self._state.why_not_running()) from exc
        return await self._checked(request.cmd, InitChannel.decode_reply(frame))

    async def _checked(self, cmd: str, reply: Reply | None) -> Reply:
        """``reply``, or why there is none: a shepherd the agent killed, a crash, a refusal."""
        if reply is None:
            if self._init_alive():  # only this command's shepherd died: the agent killed it
                return Reply(137, False, 0.0, b"", KILLED_FROM_INSIDE.encode())
            await self._mark_crashed("the sandbox died while running a command")
            raise self._death(f"{self._state.why_not_running()}: {cmd[:200]!r}")
        if reply.error is not None:
            raise SandboxError(f"the sandbox could not run {cmd[:200]!r}: {reply.error}")
        return reply

    # ------------------------------------------------------------------ files
    async def upload(self, src: Path | FileMap, dest: str) -> None:
        await transfer.upload(self.exec, src, dest)

    async def download(self, src: str, dest: Path) -> None:
        await transfer.download(self._run, src, dest)

    async def read_file(self, path: str) -> bytes:
        return await transfer.read_file(self._run, path)
