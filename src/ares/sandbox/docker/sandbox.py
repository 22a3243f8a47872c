"""DockerSandbox: one container per episode, driven through the Docker API.

The container's pid 1 is a shell loop that sleeps and reaps orphans (no init binary needed in the
image or on the engine host). Commands run through ``docker exec`` under the wrapper described in
``execution.py``; files move with ``put_archive``/``get_archive`` (``transfer.py``). For the
verifier, ``fork_outputs`` starts a fresh container of the pristine image with only the task's
outputs carried over (``outputs.py``), and ``halt`` kills everything in a container while keeping
its files readable.
``snapshot`` commits a running container and ``from_snapshot`` restores it (``snapshot.py``).

This class keeps the lifecycle, snapshots, forks and every method of the sandbox protocol (tracing
wraps a class's own methods); its bases hold the rest by concept: the container and the SDK calls on
it (``container_calls.py``), the plumbing under ``exec`` (``commands.py``) and what a verifier fork
carries over (``fork_carry.py``).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import docker

from ares.errors import SandboxError
from ares.images.identity import ImageIdentity
from ares.sandbox.base import (
    IMAGE_WORKDIR,
    BindMount,
    DiffSummary,
    ExecResult,
    FileMap,
    ImageSpec,
    SandboxSpec,
)
from ares.sandbox.capabilities import Capability
from ares.sandbox.docker import janitor, loopback, transfer, verifier_fork
from ares.sandbox.docker.client import run_blocking
from ares.sandbox.docker.commands import KILL_MARGIN_S as KILL_MARGIN_S  # re-exported: moved there
from ares.sandbox.docker.commands import SWEEP_TIMEOUT_S as SWEEP_TIMEOUT_S
from ares.sandbox.docker.commands import ContainerCommands
from ares.sandbox.docker.engine import DockerEngine, default_engine
from ares.sandbox.docker.execution import API_ERRORS, open_exec, split_trailer
from ares.sandbox.docker.fork_carry import ForkCarry, changed_paths, check_binds
from ares.sandbox.docker.outputs import output_roots, output_state, stat_path, summarize_changes, within
from ares.sandbox.docker.snapshot import (
    Change,
    changes_of,
    check_backend,
    check_snapshot_image,
    commit_blocking,
    make_snapshot,
    merge_changes,
    release_blocking,
)
from ares.sandbox.docker.trusted import TrustedShell, image_shell, prepare, seeded_paths
from ares.sandbox.lifecycle import StartStopContext
from ares.sandbox.snapshots import FilesystemSnapshot
from ares.sandbox.trusted_shell import ShellBundle

log = logging.getLogger(__name__)
FROZEN_REPOSITORY = "ares-frozen"


@dataclass(frozen=True, slots=True)
class VerifierFork:
    """A started sandbox for a task's tests, what the agent changed outside the task's outputs, and
    in ``full`` mode the trusted shell the fork has (None: outputs mode, or an image without bash)."""

    sandbox: DockerSandbox
    outside: DiffSummary
    shell: TrustedShell | None = None

    def shell_argv(self, *args: str) -> list[str] | None:
        """The command line that runs the image's own bash with ``args`` in the fork, for its
        ``exec(argv=...)``; None when the fork has no trusted shell (its commands use its own)."""
        return None if self.shell is None else self.shell.argv(*args)


class BoundFork:
    """``fork_verifier``'s result: an unstarted fork, and (once it started) what the agent changed
    outside its outputs."""

    def __init__(self, sandbox: DockerSandbox) -> None:
        self.sandbox = sandbox

    @property
    def outside(self) -> DiffSummary:
        pending = self.sandbox._pending
        if pending is None or pending.outside is None:
            raise SandboxError("the verifier fork has not been started")
        return pending.outside


class DockerSandbox(ForkCarry, ContainerCommands, StartStopContext):
    """A sandbox in a container. Create it, ``await start()``, ``exec`` commands, ``await stop()``."""

    #: ``LOOPBACK`` needs the engine on this host (``listen_loopback`` says so otherwise); snapshots
    #: are restored by ``DockerSandboxFactory``.
    capabilities = frozenset({
        Capability.OUTPUTS_FORK, Capability.FULL_FORK, Capability.FROZEN_FORK, Capability.HALT,
        Capability.SNAPSHOT, Capability.LOOPBACK, Capability.VERIFIER_FORK, Capability.ARCHIVE,
    })  # fmt: skip

    def __init__(
        self,
        spec: SandboxSpec | None = None,
        *,
        engine: DockerEngine | None = None,
        image: str | None = None,
        owns_image: bool = False,
    ) -> None:
        self.spec = spec or SandboxSpec()
        self._engine = engine or default_engine()
        self._image = image  # an image id that overrides spec.image (set by fork_frozen)
        self._owns_image = owns_image
        self._client: docker.DockerClient | None = None
        self._container: str | None = None
        # The pristine image the container's files derive from: the image it was made from, or for a
        # sandbox made from a snapshot the snapshot's own base (fork_outputs and the trusted shell
        # start from it).
        self._started_from: str | None = None
        # A sandbox made from a snapshot: the pristine image id, and the changes against it that the
        # snapshot's image already holds (None: the engine could not list them).
        self._base: str | None = None
        self._inherited: list[Change] | None = []
        self._frozen = False
        # A verifier fork's preparation before its container starts (see trusted.py).
        self._trusted: TrustedShell | None = None
        self._fresh: tuple[str, ...] = ()
        self._gone: str | None = None
        # A fork_verifier fork's host binds and the outputs it carries in when it starts.
        self._binds: tuple[BindMount, ...] = ()
        self._pending: verifier_fork.PendingCarry | None = None
        self._host_root: Path | None = None

    @classmethod
    def from_snapshot(
        cls,
        snapshot: FilesystemSnapshot,
        spec: SandboxSpec | None = None,
        *,
        engine: DockerEngine | None = None,
    ) -> DockerSandbox:
        """A new, unstarted sandbox whose files are the snapshot's (see ``snapshot``). Each call
        makes an independent one: n calls are a fork. The snapshot keeps owning its image."""
        check_backend(snapshot)
        sandbox = cls(spec, engine=engine, image=snapshot.ref)
        sandbox._base, sandbox._inherited = snapshot.image, changes_of(snapshot)
        return sandbox

    # ------------------------------------------------------------------ lifecycle
    @property
    def container_id(self) -> str | None:
        return self._container

    @property
    def running(self) -> bool:
        return self._container is not None and not self._frozen

    async def start(self) -> None:
        if self._container is not None:
            raise SandboxError("the sandbox is already running")
        self._gone, self._frozen = None, False
        janitor.install_handlers()  # here, on the loop's thread: signal handlers need the main thread
        self._client = await self._engine.client()
        if self._base is not None:
            assert self._image is not None
            await check_snapshot_image(
                self._engine, self._client.api, self._image, self._base, self.spec.image, self.spec.addons
            )
        image = self._image or await self._engine.resolve(self.spec.image, self.spec.addons)
        self.image_identity = engine_identity(self.spec.image, image)
        if self.spec.workdir == IMAGE_WORKDIR:  # the image's own working dir (its config's WorkingDir)
            inspected = await run_blocking(self._client.api.inspect_image, image)
            workdir = (inspected.get("Config") or {}).get("WorkingDir") or "/"
            self.spec = replace(self.spec, workdir=workdir)
        self._started_from = self._base or image
        await self._create_container(image)
        assert self._container is not None
        try:
            if self._trusted is not None or self._fresh:
                await self._api(
                    "prepare the verifier's container", prepare, self._client.api, self._container,
                    self._trusted, self._fresh,
                )  # fmt: skip
            await self._api("start the sandbox container", self._client.api.start, self._container)
            if self._pending is not None:
                await self._carry_in(self._pending)
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        """Remove the container with everything running in it (and a fork's image). Safe twice."""
        container, self._container = self._container, None
        self._frozen = False
        self._gone = self._gone or "the sandbox was stopped"
        if container is not None and self._client is not None:
            await run_blocking(self._remove_blocking, container)
            if self._base is not None and self._image is not None:  # a discarded snapshot may go now
                try:
                    await run_blocking(release_blocking, self._client.api, self._image)
                except (SandboxError, *API_ERRORS) as exc:
                    log.warning("could not remove discarded snapshot image %s: %s", self._image[:19], exc)
        host, self._host_root = self._host_root, None
        if host is not None:
            await asyncio.to_thread(shutil.rmtree, host, ignore_errors=True)
        if self._owns_image and self._image is not None and self._client is not None:
            image, self._image = self._image, None
            await self._remove_owned_image(image)

    async def listen_loopback(self, port: int = 0) -> socket.socket:
        """A host-owned TCP socket listening on 127.0.0.1:``port`` in the container's network namespace
        (see ``LoopbackListener``); SandboxUnavailableError unless the engine runs on this host."""
        container = self._require_running()
        loopback.check_local_engine(self._engine.base_url)
        assert self._client is not None
        info = await self._api("inspect the sandbox container", self._client.api.inspect_container, container)
        return await loopback.listen(container, info, port)

    async def snapshot(self) -> FilesystemSnapshot:
        """Freeze this sandbox's files as a snapshot; the sandbox goes on running, its processes too.

        The container is paused (if the engine can pause it), its changes read from the engine's
        diff, and it is committed to an image ``ares-snapshot:<random>`` labelled ``ares.frozen=1``
        (the janitor removes it at exit, ``ares sandboxes gc`` after a crash; ``discard_snapshot``
        earlier). Processes are not captured: sandboxes made from the snapshot start with none.
        Volumes and tmpfs mounts (``/dev/shm``) are not part of the container's files.
        """
        container = self._require_container()
        assert self._client is not None and self._started_from is not None
        api = self._client.api
        diff, image, why = await self._api(
            "snapshot the sandbox", commit_blocking, api, self._engine, container, running=not self._frozen
        )
        changes = None if diff is None or self._inherited is None else merge_changes(self._inherited, diff)
        if diff is not None and self._inherited is None:
            why = "the snapshot this sandbox was made from has no list of changes"
        return await self._api(
            "inspect the snapshot", make_snapshot, api, image=image, base=self._started_from, changes=changes,
            why=why,
        )  # fmt: skip

    async def fork_frozen(self) -> DockerSandbox:
        """Kill every process here and return a new, unstarted sandbox of this container's filesystem.

        Used by the verifier so that nothing the agent left running can touch the reward. The
        container is stopped and committed to a temporary image that the fork removes on ``stop()``.
        """
        container = await self._halt()
        assert self._client is not None
        api = self._client.api
        labels = {**janitor.owner_labels(), janitor.FROZEN_LABEL: "1"}
        committed = await self._api(
            "commit the sandbox container", api.commit, container, repository=FROZEN_REPOSITORY,
            tag=secrets.token_hex(6), changes=[f"LABEL {k}={v}" for k, v in labels.items()],
        )  # fmt: skip
        image = str(committed["Id"])
        janitor.track_image(image, self._engine.connector())
        return DockerSandbox(self.spec, engine=self._engine, image=image, owns_image=True)

    async def fork_outputs(self, outputs: Sequence[str] | None, *, fresh: Sequence[str] = ()) -> VerifierFork:
        """Kill every process here and return a *started* sandbox for a task's tests, with what this
        one changed outside ``outputs`` (absolute paths; the workdir for ``None``).

        Its filesystem is a fresh container of the image this sandbox started from, with each output
        path replaced by this container's version: copied with the archive API (modes and symlinks
        kept), removed if it was deleted here, left as the image has it if it is a symlink here. So
        tools, interpreters, site dirs and start-up hooks changed elsewhere never reach the tests, and
        no program of this container runs again. ``outputs=None`` is full mode: a ``fork_frozen()``
        of the whole container, whose pid 1 and ``exec(argv=...)`` run on the image's own bash from
        a trusted shell bundle (``VerifierFork.shell``; see ``trusted.py``), so that no program of
        this container runs before the tests either. ``fresh`` dirs (e.g. /tests, /logs/verifier)
        are empty and writable in the fork before it starts. The caller stops the fork; this sandbox
        stays readable until ``stop()``.
        """
        container = await self._halt()
        assert self._client is not None and self._started_from is not None
        api = self._client.api
        changes = self._pristine_changes(await self._api("read the sandbox's changes", api.diff, container))
        shell: TrustedShell | None = None
        started_from = self._started_from
        if outputs is None:
            pristine = replace(self.spec, network=False)
            bundle = await image_shell(
                self._engine.base_url,
                started_from,
                lambda: DockerSandbox(pristine, engine=self._engine, image=started_from),
            )
            fork = await self.fork_frozen()
            if bundle is not None:
                shell = TrustedShell.fresh(bundle)
                fork.spec = replace(fork.spec, env={"SHELL": "/bin/bash", **fork.spec.env})  # no NSS lookup
            kept: tuple[str, ...] = (self.spec.workdir,)
        else:
            kept = output_roots(outputs)
            stats = {p: await self._api(f"stat {p}", stat_path, api, container, p) for p in kept}
            fork = DockerSandbox(self.spec, engine=self._engine, image=self._started_from)
        fork._trusted, fork._fresh = shell, tuple(fresh)
        try:
            await fork.start()
            assert fork._container is not None
            baseline = await fork._api("read the fork's changes", api.diff, fork._container)
            if outputs is not None:
                states = {p: output_state(s) for p, s in stats.items()}
                await fork._carry(container, states, self.host_dir("outputs-carry"), changed_paths(changes))
        except BaseException:
            await fork.stop()
            raise
        # What the preparation itself changed in the fork is no engine noise to discount.
        ours = seeded_paths(shell, fork._fresh)
        baseline = [c for c in baseline or () if not any(within(str(c["Path"]), p) for p in ours)]
        return VerifierFork(fork, summarize_changes(changes, kept, baseline=baseline), shell)

    async def fork_verifier(
        self,
        *,
        outputs: Sequence[str] | None,
        binds: Sequence[BindMount] = (),
        drop: Callable[[str], bool] | None = None,
    ) -> BoundFork:
        """Kill every process here and return an unstarted fork for a task's tests, with ``binds``
        (read-only unless they say otherwise) and no network.

        Its container is a new one of the pristine image this sandbox started from. Starting it
        carries in only what the agent changed below ``outputs`` (files added or modified with their
        content and mode, symlinks as links, deletions), minus every path ``drop`` names, whose image
        version stays (see ``verifier_fork.py`` and ``carry.py``). An output that is a symlink or not
        a dir here is not carried (the image's stays; the fork's ``outside`` names it); outputs that
        break a bound of ``carry_bounds`` raise ``OutputRefusedError`` (here or at ``start``), which
        the verifier scores 0. Binds need the engine on this host. This sandbox's files stay until its
        ``stop()``, which must come after the fork's.
        """
        if outputs is None:
            raise SandboxError(
                "a docker verifier fork with host binds carries outputs only; use fork_outputs(None) "
                "for full mode"
            )
        check_binds(binds, self._engine.base_url)
        container = await self._halt()
        assert self._client is not None and self._started_from is not None
        pending = await self._spool_outputs(container, outputs, drop, await self._listed_changes(container))
        fork = DockerSandbox(replace(self.spec, network=False), engine=self._engine, image=self._started_from)
        fork._binds, fork._pending = tuple(binds), pending
        return BoundFork(fork)

    def host_dir(self, name: str) -> Path:
        """A new empty host dir that lives (and is deleted) with this sandbox: a bind source for a
        verifier fork (the engine must run on this host to mount it)."""
        if self._host_root is None:
            self._host_root = Path(tempfile.mkdtemp(prefix="ares-docker-host-"))
        path = self._host_root / f"{name}-{secrets.token_hex(4)}"
        path.mkdir(mode=0o755)
        return path

    async def trusted_shell(self) -> tuple[Path, ShellBundle] | None:
        """None: a ``fork_verifier`` fork is a fresh container of the pristine image, whose own bash
        runs the tests (the agent's changes reach only its outputs)."""
        return None

    async def halt(self) -> None:
        """Kill every process here (the container stops) and keep its files for ``download`` and
        ``read_file``; ``exec`` and ``upload`` refuse from now on. The verifier calls it once the
        tests are done, so nothing they started can still write the reward it reads."""
        await self._halt()

    # ------------------------------------------------------------------ commands
    async def exec(
        self,
        cmd: str,
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
        stdin: bytes | None = None,
        argv: Sequence[str] | None = None,
    ) -> ExecResult:
        """Run ``cmd`` with the container's bash (else sh) under the exec wrapper.

        ``argv`` (an absolute program path first) is run exactly instead, with no shell and no PATH
        lookup, under a wrapper that the image's own bash runs with builtins only: only in a ``full``
        mode verifier fork with a trusted shell (``fork_outputs(None)``), where no program of the
        container may run. ``cmd`` then only names it in errors; ``stdin`` is not supported.
        """
        container = self._require_running()
        if timeout_s is not None and not timeout_s > 0:
            raise SandboxError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
        token = secrets.token_hex(8)
        workdir = cwd or self.spec.workdir
        wrapped = await self._wrapped_command(container, token, cmd, workdir, timeout_s, stdin, argv)
        started = time.monotonic()
        assert self._client is not None
        api = self._client.api
        stream, exec_id = await self._api("run a command", open_exec, api, container, wrapped, env)
        try:
            await self._wait_or_kill(stream, container, token, cmd, timeout_s, started)
        finally:
            stream.abort()
            stream.close()
        duration = time.monotonic() - started
        stdout, trailer = split_trailer(bytes(stream.stdout), token)
        if trailer is None:
            exit_code = await self._exit_code_without_trailer(exec_id, cmd)
            oom_kills = fork_refusals = 0
        else:
            exit_code, oom_kills, fork_refusals = trailer.exit_code, trailer.oom_kills, trailer.fork_refusals
        timed_out = timeout_s is not None and exit_code == 137 and duration >= timeout_s
        if timed_out:
            await self._sweep(container, token)  # processes that left the killed process group
        return ExecResult(
            stdout=stdout.decode(errors="replace"),
            stderr=bytes(stream.stderr).decode(errors="replace"),
            exit_code=exit_code,
            timed_out=timed_out,
            duration_s=duration,
            limit_hit="memory" if oom_kills > 0 else "pids" if fork_refusals > 0 else None,
        )

    # ------------------------------------------------------------------ files
    async def upload(self, src: Path | FileMap, dest: str) -> None:
        container = self._require_running()
        assert self._client is not None
        await transfer.upload(self._client.api, container, src, dest, mkdir=self.exec, call=self._api)

    async def download(self, src: str, dest: Path) -> None:
        await transfer.download(self._get_archive, src, dest)

    async def read_file(self, path: str) -> bytes:
        return await transfer.read_file(self._get_archive, path)

    async def archive(self, path: str) -> bytes:
        """The archive API's tar of ``path``, unextracted (the verifier reads its logs from it)."""
        return (await self._get_archive(path, "archive"))[0]


def engine_identity(spec: ImageSpec, image: str) -> ImageIdentity:
    """A docker sandbox's image: the engine's image (built from the task's Dockerfile, or named)."""
    requested = spec.name or (str(spec.dockerfile_dir) if spec.dockerfile_dir is not None else None)
    return ImageIdentity(requested, "build" if spec.dockerfile_dir is not None else "engine", image)
