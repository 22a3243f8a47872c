"""The host's part in starting a sandbox init: what the init is told, in which order, its id maps,
and why a start failed.

``InitDialogue`` is the host's side of the start-up steps of _init.py's protocol; the sandbox
(``LocalSandbox._configure``) runs them in order and does what lies between: the user-mode network
and the cgroups. The config, the init's uid/gid maps with the idmapped clones a root-run init mounts,
and the error a failed start explains itself with need no sandbox object.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from ares.errors import SandboxError, SandboxUnavailableError
from ares.images.rootfs import RootfsPlan
from ares.sandbox.base import BindMount
from ares.sandbox.local import channel, limits, userns
from ares.sandbox.local.channel import InitChannel

HINT = (
    "The local sandbox needs Linux user namespaces (sysctl user.max_user_namespaces > 0, and "
    "kernel.unprivileged_userns_clone=1 / kernel.apparmor_restrict_unprivileged_userns=0 when "
    "not root), overlayfs mounts inside them (Linux >= 5.11) and, run as root, idmapped mounts "
    "(Linux >= 5.19). `ares doctor` checks this machine; use the docker backend where these are "
    "unavailable."
)


def checked_bind(bind: BindMount) -> BindMount:
    """``bind`` if the init can mount it: a host dir on an absolute target below / without ``..``."""
    target = PurePosixPath(bind.target)
    if not target.is_absolute() or ".." in target.parts or str(target) == "/":
        raise SandboxError(f"bind target {bind.target!r} must be an absolute path below /, without '..'")
    if not Path(bind.source).is_dir():
        raise SandboxError(f"bind source {bind.source} is not a directory")
    return bind


@dataclass(frozen=True, slots=True)
class InitConfig:
    """What an init builds the sandbox from (``init/filesystem.py``: ``setup_filesystem``, ``harden``)."""

    sandbox_dir: Path
    plan: RootfsPlan
    hostname: str
    idmapped: bool
    seccomp: bytes | None
    binds: tuple[BindMount, ...]
    remove: tuple[str, ...]

    @property
    def layers(self) -> list[str]:
        """Every lower dir of the plan once, in the order the init numbers them."""
        return list(dict.fromkeys(path for m in self.plan.mounts for path in m.lower))

    def message(self) -> dict[str, Any]:
        layers = self.layers
        index = {path: i for i, path in enumerate(layers)}
        return {
            "root": str(self.sandbox_dir / "root"),
            "stage": str(self.sandbox_dir / "stage"),
            "scratch": str(self.sandbox_dir),
            "layers": layers,
            "mounts": [
                {"target": m.target, "layers": [index[p] for p in m.lower], "key": m.key}
                for m in self.plan.mounts
            ],
            "hostname": self.hostname,
            "idmapped": self.idmapped,
            "seccomp": self.seccomp,
            "oom_score_adj": limits.HELPER_OOM_SCORE_ADJ,
            "binds": [
                {"source": str(b.source), "target": b.target, "readonly": b.read_only} for b in self.binds
            ],
            "remove": list(self.remove),
        }

    def clones(self) -> list[tuple[str, int]]:
        """(host path, mount flags) of what a root-run init mounts as idmapped clones, in the order
        it takes them: the layers, the sandbox dir, then the binds."""
        clones = [(path, 0) for path in (*self.layers, str(self.sandbox_dir))]
        clones += [
            (str(b.source), userns.BIND_READ_ONLY if b.read_only else userns.BIND_WRITABLE)
            for b in self.binds
        ]
        return clones


def map_ids(pid: int, ids: userns.IdRange | None, mounts: Sequence[tuple[str, int]]) -> list[int]:
    """Write init ``pid``'s uid/gid maps (``ids``, or the invoking user alone); return idmapped
    clones of ``mounts`` (path, mount flags) when root-run, for the init to mount. Blocking."""
    proc = Path(f"/proc/{pid}")
    fds: list[int] = []
    try:
        if ids is not None:
            (proc / "uid_map").write_text(ids.map_line())
            (proc / "gid_map").write_text(ids.map_line())
            user_ns = os.open(proc / "ns" / "user", os.O_RDONLY | os.O_CLOEXEC)
            try:
                for path, flags in mounts:
                    fds.append(userns.idmapped_clone(path, user_ns, flags=flags))
            finally:
                os.close(user_ns)
        else:
            (proc / "setgroups").write_text("deny\n")
            (proc / "uid_map").write_text(f"0 {os.geteuid()} 1\n")
            (proc / "gid_map").write_text(f"0 {os.getegid()} 1\n")
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return fds


def start_failure(init_log: Path | None, reason: str) -> str:
    """Why a start failed, what the machine needs, and the end of the init's log."""
    log = ""
    if init_log is not None and init_log.exists():
        log = init_log.read_text(errors="replace").strip()[-2000:]
    return f"cannot start the local sandbox: {reason}. {HINT}" + (f"\ninit log:\n{log}" if log else "")


class InitDialogue:
    """The host's side of an init's start-up steps, in the order the init expects them."""

    def __init__(
        self, ctl: InitChannel, send: Callable[[bytes, Sequence[int]], Awaitable[None]], init_log: Path
    ) -> None:
        """``send`` is the sandbox's own (it records a crash when the init is gone); ``init_log`` is
        where the init's output goes, quoted when the start fails."""
        self._ctl = ctl
        self._send = send
        self._log = init_log

    async def unshare(self, config: InitConfig, pid: int, ids: userns.IdRange | None) -> list[int]:
        """Send ``config``; once the init has unshared, write its id maps. Returns the idmapped
        clones, for ``send_fds`` (the caller closes them)."""
        await self._send(InitChannel.encode(config.message()), ())
        await self._expect(channel.STAGE_UNSHARED)
        return await asyncio.to_thread(map_ids, pid, ids, config.clones())

    async def send_fds(self, fds: Sequence[int]) -> None:
        for message, batch in InitChannel.fd_batches(fds):
            await self._send(message, batch)

    async def mapped(self, resolv: str | None) -> None:
        """The id maps are written (and the network attached, with its resolver config if any)."""
        await self._send(InitChannel.encode({channel.OP: channel.OP_MAPPED, "resolv": resolv}), ())

    async def limited(self, pids: list[int]) -> str:
        """The init is in the sandbox's cgroups: wait until pid 1 exists (its host pid goes first
        in ``pids`` at once, so a failure from here on kills it) and is ready. Returns its shell."""
        await self._send(InitChannel.encode({channel.OP: channel.OP_LIMITED}), ())
        stages: dict[str, dict[str, Any]] = {}
        while not {channel.STAGE_FORKED, channel.STAGE_READY} <= stages.keys():
            msg = await self._recv_stage()
            stages[msg[channel.STAGE]] = msg
            if msg[channel.STAGE] == channel.STAGE_FORKED:
                pids.insert(0, int(msg["pid"]))
        return str(stages[channel.STAGE_READY]["shell"])

    async def _recv_stage(self) -> dict[str, Any]:
        msg = await self._ctl.recv()
        if msg is None:
            raise SandboxUnavailableError(start_failure(self._log, "the sandbox init exited during start-up"))
        if msg.get(channel.STAGE) == channel.STAGE_ERROR:
            raise SandboxUnavailableError(start_failure(self._log, msg[channel.ERROR]))
        return msg

    async def _expect(self, stage: str) -> None:
        msg = await self._recv_stage()
        if msg.get(channel.STAGE) != stage:
            raise SandboxError(f"sandbox init protocol error: expected {stage!r}, got {msg!r}")
