"""How the host starts sandbox inits: forked by a pre-started zygote, or spawned directly.

A fresh ``python -I -S _init.py FD`` spends ~25 ms starting the interpreter and importing before it
does anything, twice per RL episode (agent and verifier sandbox). The zygote (``_init.py --zygote``)
pays that once per host process and forks an init per request in ~1 ms. It is started on first use,
restarted when it died, and never shared with a fork()ed copy of the host (that gets its own).

All zygote bookkeeping (spawn, requests, reaping) happens on one daemon thread that lives as long as
the process: PR_SET_PDEATHSIG, which kills the zygote (and through theirs, every init) with the host,
fires when the *thread* that forked it exits, so neither an event loop's thread nor a ``to_thread``
worker may be that parent. ``ARES_SANDBOX_ZYGOTE=0`` spawns every init directly, as does any start
the zygote fails (a broken zygote is disabled after a few failures in a row).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import marshal
import os
import queue
import select
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from ares.sandbox.local import limits

logger = logging.getLogger(__name__)

INIT_SCRIPT = str(Path(__file__).with_name("_init.py"))
ENV_SWITCH = "ARES_SANDBOX_ZYGOTE"
#: Consecutive failed starts after which this process stops using the zygote.
MAX_FAILURES = 3
_REQUEST = marshal.dumps({"op": "spawn"})


class InitProcess(Protocol):
    """A sandbox's outer init, as the host sees it."""

    pid: int

    async def finish(self, grace_s: float) -> None:
        """Wait up to ``grace_s`` for it to exit, then SIGKILL it and wait for that."""


async def start_init(log_path: Path) -> tuple[socket.socket, InitProcess]:
    """Start an init writing to ``log_path``; returns the host end of its control socket (non-blocking)."""
    if enabled():
        started = await _from_zygote(log_path)
        if started is not None:
            return started
    return await _spawn_direct(log_path)


def enabled() -> bool:
    """Whether inits come from the zygote ($ARES_SANDBOX_ZYGOTE is not 0 and it has not failed)."""
    return os.environ.get(ENV_SWITCH, "1") != "0" and _failures < MAX_FAILURES


def current_pid() -> int | None:
    """The pid of this process's zygote, if one is running (for tests and diagnostics)."""
    keeper = _keeper
    zygote = keeper.zygote if keeper is not None and keeper.owner == os.getpid() else None
    return zygote.pid if zygote is not None and zygote.alive() else None


# ---------------------------------------------------------------------- direct spawn
class DirectInit:
    """An init spawned as ``python -I -S _init.py FD`` by the event loop (a child of this process)."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self._proc = proc
        self.pid = proc.pid

    async def finish(self, grace_s: float) -> None:
        try:
            await asyncio.wait_for(self._proc.wait(), grace_s)
        except TimeoutError:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
            await self._proc.wait()


async def _spawn_direct(log_path: Path) -> tuple[socket.socket, InitProcess]:
    host_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    host_end.setblocking(False)
    try:
        # Opening a fresh local file is not I/O bound; doing it inline keeps start-up fast.
        with child_end, open(log_path, "wb") as log:  # noqa: ASYNC230
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-I", "-S", INIT_SCRIPT, str(child_end.fileno()),
                pass_fds=(child_end.fileno(),), env={}, stdin=asyncio.subprocess.DEVNULL,
                stdout=log, stderr=log, cwd="/",
            )  # fmt: skip
    except BaseException:
        host_end.close()
        raise
    return host_end, DirectInit(proc)


# ---------------------------------------------------------------------- zygote: host side
class ZygoteInit:
    """An init forked by the zygote: not our child, so its exit is awaited on a pidfd."""

    def __init__(self, pid: int, pidfd: int) -> None:
        self.pid = pid
        self._pidfd = pidfd

    async def finish(self, grace_s: float) -> None:
        try:
            try:
                await asyncio.wait_for(_readable(self._pidfd), grace_s)
            except TimeoutError:
                with contextlib.suppress(OSError):
                    signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
                await _readable(self._pidfd)
        finally:
            os.close(self._pidfd)

    def exited(self) -> bool:
        poller = select.poll()
        poller.register(self._pidfd, select.POLLIN)
        return bool(poller.poll(0))

    def kill_blocking(self, timeout_s: float = 5.0) -> None:
        """SIGKILL it and wait (bounded) until it has exited, off any event loop."""
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
        poller = select.poll()
        poller.register(self._pidfd, select.POLLIN)
        poller.poll(timeout_s * 1000)
        os.close(self._pidfd)

    def forget(self) -> None:
        """Close the pidfd without touching the process (a fork()ed host's copy)."""
        with contextlib.suppress(OSError):
            os.close(self._pidfd)


_failures = 0


async def _from_zygote(log_path: Path) -> tuple[socket.socket, InitProcess] | None:
    """An init forked by the zygote, or None when the zygote could not provide one."""
    global _failures
    host_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    host_end.setblocking(False)
    try:
        data, got = await _request_init(child_end, log_path)
    except BaseException:
        host_end.close()
        raise
    try:
        msg: Any = marshal.loads(data) if data else {"error": "the zygote exited"}
    except (EOFError, ValueError, TypeError):
        msg = None
    if isinstance(msg, dict) and isinstance(msg.get("pid"), int) and len(got) == 1:
        _failures = 0
        return host_end, ZygoteInit(msg["pid"], got[0])
    for fd in got:
        os.close(fd)
    host_end.close()  # a child forked just before the zygote died sees EOF and exits
    _failures += 1
    log = logger.warning if _failures == MAX_FAILURES else logger.debug
    problem = msg.get("error") if isinstance(msg, dict) else "a malformed reply"
    log("the sandbox zygote failed (%s); the init is started directly", problem)
    return None


async def _request_init(child_end: socket.socket, log_path: Path) -> tuple[bytes, list[int]]:
    """Ask the zygote for an init on ``child_end``; its reply and fds (nothing if it gave none)."""
    reply, reply_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    reply.setblocking(False)
    with reply, reply_child, child_end:
        try:
            keeper = _get_keeper()
        except RuntimeError as exc:  # no thread can be started now
            return marshal.dumps({"error": f"cannot start the zygote thread: {exc}"}), []
        log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
        # The keeper owns these from here and closes them once sent, even if this start is cancelled.
        fds = [child_end.detach(), log_fd, reply_child.detach()]
        try:
            await asyncio.wrap_future(keeper.submit(lambda: _send_request(keeper, fds)))
        except OSError as exc:
            return marshal.dumps({"error": str(exc)}), []
        return await _recv_with_fds(reply)


def start_init_blocking(log_fd: int, timeout_s: float = 10.0) -> tuple[socket.socket, ZygoteInit] | None:
    """``start_init`` for a plain thread (never an event loop's, never the keeper), writing its
    output to (a duplicate of) ``log_fd``: an init forked by the zygote, or None when the zygote is
    off or could not provide one (no direct spawn: the caller only prepares ahead of time)."""
    if not enabled():
        return None
    host_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    reply, reply_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with reply, reply_child, child_end:
        try:
            keeper = _get_keeper()
            fds = [child_end.detach(), os.dup(log_fd), reply_child.detach()]
            keeper.submit(lambda: _send_request(keeper, fds)).result(timeout_s)
            reply.settimeout(timeout_s)
            data, got, _, _ = socket.recv_fds(reply, 4096, 1, socket.MSG_CMSG_CLOEXEC)
        except (OSError, RuntimeError, concurrent.futures.TimeoutError):
            host_end.close()
            return None
    try:
        msg: Any = marshal.loads(data) if data else None
    except (EOFError, ValueError, TypeError):
        msg = None
    if isinstance(msg, dict) and isinstance(msg.get("pid"), int) and len(got) == 1:
        host_end.setblocking(False)
        return host_end, ZygoteInit(msg["pid"], got[0])
    for fd in got:
        os.close(fd)
    host_end.close()
    return None


async def _readable(fd: int) -> None:
    """Wait, on the running loop, until ``fd`` is readable (a pidfd: the process has exited)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    if poller.poll(0):
        return
    loop = asyncio.get_running_loop()
    ready = loop.create_future()
    loop.add_reader(fd, lambda: ready.done() or ready.set_result(None))
    try:
        await ready
    finally:
        loop.remove_reader(fd)


async def _recv_with_fds(sock: socket.socket) -> tuple[bytes, list[int]]:
    """One message and the fds it carries (close-on-exec), from a non-blocking socket."""
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(sock, 4096, 1, socket.MSG_CMSG_CLOEXEC)
        except BlockingIOError:
            await _readable(sock.fileno())
        except ConnectionResetError:
            return b"", []
        else:
            return data, fds


# ---------------------------------------------------------------------- zygote: keeper thread
class _Zygote:
    def __init__(self, proc: subprocess.Popen[bytes], sock: socket.socket) -> None:
        self.proc = proc
        self.pid = proc.pid
        self.pidfd = os.pidfd_open(proc.pid)  # not reaped before this: only the keeper reaps it
        self.sock = sock

    def alive(self) -> bool:
        poller = select.poll()
        poller.register(self.pidfd, select.POLLIN)
        return not poller.poll(0)

    def discard(self) -> None:
        """Kill (if need be), reap and forget it; its inits die with it (their PR_SET_PDEATHSIG)."""
        self.sock.close()
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
        self.proc.wait()
        os.close(self.pidfd)


class _Keeper(threading.Thread):
    """The thread that spawns, feeds and reaps this process's zygote; it never exits."""

    def __init__(self) -> None:
        super().__init__(name="ares-sandbox-zygote", daemon=True)
        self.owner = os.getpid()
        self.zygote: _Zygote | None = None
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], concurrent.futures.Future[Any]]]
        self._jobs = queue.SimpleQueue()
        self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)

    def submit(self, job: Callable[[], Any]) -> concurrent.futures.Future[Any]:
        """Run ``job`` on the keeper thread; it runs even if the returned future is cancelled."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._jobs.put((job, future))
        with contextlib.suppress(BlockingIOError):  # full: a wake-up is pending anyway
            os.write(self._wake_w, b"\0")
        return future

    def run(self) -> None:
        poller = select.poll()
        poller.register(self._wake_r, select.POLLIN)
        watched: _Zygote | None = None
        while True:
            if watched is not self.zygote:  # watch the current zygote, to reap it as soon as it dies
                if watched is not None:
                    poller.unregister(watched.pidfd)
                watched = self.zygote
                if watched is not None:
                    poller.register(watched.pidfd, select.POLLIN)
            poller.poll()
            with contextlib.suppress(BlockingIOError):
                os.read(self._wake_r, 4096)
            if self.zygote is not None and not self.zygote.alive():
                self.forget_zygote()
            while True:
                try:
                    job, future = self._jobs.get_nowait()
                except queue.Empty:
                    break
                try:
                    result = job()
                except BaseException as exc:
                    with contextlib.suppress(concurrent.futures.InvalidStateError):
                        future.set_exception(exc)
                else:
                    with contextlib.suppress(concurrent.futures.InvalidStateError):
                        future.set_result(result)

    def forget_zygote(self) -> None:
        zygote, self.zygote = self.zygote, None
        if zygote is not None:
            zygote.discard()

    def ensure_zygote(self) -> _Zygote:
        """The running zygote, started (or restarted) if need be."""
        if self.zygote is not None and self.zygote.alive():
            return self.zygote
        self.forget_zygote()
        host_end, zygote_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with zygote_end, contextlib.ExitStack() as on_error:
            on_error.callback(host_end.close)
            # Set up as asyncio sets up a direct init (fds closed, signals restored, empty env, cwd /),
            # so that its children match one; posix_spawn would leave glibc's internal signals ignored.
            proc = subprocess.Popen(
                _zygote_argv(os.getpid(), zygote_end.fileno()), pass_fds=(zygote_end.fileno(),), env={},
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/",
            )  # fmt: skip
            on_error.callback(proc.wait)
            on_error.callback(proc.kill)
            self.zygote = _Zygote(proc, host_end)
            on_error.pop_all()
        return self.zygote

    def close_inherited(self) -> None:
        """In a fork()ed child: drop the parent's zygote and pipe without touching the zygote itself."""
        if self.zygote is not None:
            self.zygote.sock.close()
            os.close(self.zygote.pidfd)
            self.zygote = None
        os.close(self._wake_r)
        os.close(self._wake_w)


def _zygote_argv(host_pid: int, sock_fd: int) -> list[str]:
    oom = str(limits.HELPER_OOM_SCORE_ADJ)
    return [sys.executable, "-I", "-S", INIT_SCRIPT, "--zygote", str(sock_fd), str(host_pid), oom]


def _send_request(keeper: _Keeper, fds: list[int]) -> None:
    """On the keeper thread: hand ``fds`` to the zygote (restarting it once if it is dead) and close them."""
    try:
        for _ in range(2):
            zygote = keeper.ensure_zygote()
            try:
                socket.send_fds(zygote.sock, [_REQUEST], fds)
                return
            except (BrokenPipeError, ConnectionResetError):
                keeper.forget_zygote()  # it died before reading the request: the next one gets it
        raise OSError("the zygote died twice in a row")
    finally:
        for fd in fds:
            os.close(fd)


_keeper: _Keeper | None = None
_keeper_lock = threading.Lock()


def _get_keeper() -> _Keeper:
    global _keeper
    with _keeper_lock:
        if _keeper is None or _keeper.owner != os.getpid() or not _keeper.is_alive():
            keeper = _Keeper()
            keeper.start()
            _keeper = keeper
        return _keeper


def _after_fork_in_child() -> None:
    global _keeper, _failures, _keeper_lock
    _keeper_lock = threading.Lock()  # another thread may have held it at the fork
    _failures = 0
    keeper, _keeper = _keeper, None
    if keeper is not None:
        keeper.close_inherited()


os.register_at_fork(after_in_child=_after_fork_in_child)
