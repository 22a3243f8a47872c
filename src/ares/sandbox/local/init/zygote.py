"""The zygote (``_init.py --zygote``): one per host process, it pays the interpreter start and the
imports once and forks a ready init per sandbox (``ares.sandbox.local.zygote`` is the host's side).
Standard library only."""

import contextlib
import os
import select
import signal
import socket

from .capture import reap
from .kernel import PR_SET_PDEATHSIG, libc
from .main import main
from .wire import Wire


# ---------------------------------------------------------------------- zygote
# Run as ``python -I -S _init.py --zygote FD HOST_PID OOM_SCORE_ADJ``: one per host process, it pays
# the interpreter start and the imports above once and forks a ready init per sandbox.
# Request on FD: marshal {"op": "spawn"} + fds [control socket, init.log, reply socket].
# Reply on the reply socket: {"pid": pid} + a pidfd of the child (opened before the child can be
# reaped, so it never names a recycled pid), or {"error": message}. EOF on FD ends the zygote.
def zygote(sock_fd: int, host_pid: int, oom_score_adj: int) -> None:
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # and through theirs, every init with it
    if os.getppid() != host_pid:
        os._exit(1)
    close_fds_except({0, 1, 2, sock_fd})
    signal.pthread_sigmask(signal.SIG_SETMASK, ())  # whatever the host thread blocked
    # Out of the OOM killer's reach like the inits (needs root): its death would end every sandbox.
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as f:
        f.write(str(oom_score_adj))
    # What a fresh interpreter has; each child gets exactly this back.
    fresh = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGCHLD)}
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's ^C is the host's to handle
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)  # only wakes the loop, which reaps
    sock = socket.socket(fileno=sock_fd)
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    poller.register(wake_r, select.POLLIN)
    while True:
        for fd, _ in poller.poll():
            if fd == wake_r:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_r, 4096)
                reap({})
                continue
            data, fds, _, _ = socket.recv_fds(sock, 4096, 3)
            if not data:
                os._exit(0)
            if len(fds) == 3:
                fork_init(sock, fds, fresh)
            for got in fds:
                os.close(got)


def fork_init(sock: socket.socket, fds: list[int], fresh: dict) -> None:
    """Fork a child that becomes what ``python -I -S _init.py FD`` is, and answer with its pid."""
    ctl, log, reply = fds
    zygote_pid = os.getpid()
    try:
        pid = os.fork()
    except OSError as exc:  # e.g. the host's pids limit
        answer(reply, {"error": f"cannot fork the sandbox init: {exc.strerror}"}, [])
        return
    if pid == 0:
        try:
            signal.set_wakeup_fd(-1)  # before its pipe closes: a signal must never write to a reused fd
            for sig, handler in fresh.items():
                signal.signal(sig, handler)
            sock.detach()  # its fd closes below; the object must never close that number again
            os.dup2(log, 1)
            os.dup2(log, 2)
            os.dup2(ctl, 3)
            close_fds_except({0, 1, 2, 3})
            os.chdir("/")
            main(3, zygote_pid, zygote_child=True)
        finally:
            os._exit(1)
    pidfd = os.pidfd_open(pid)  # not reaped yet: the loop only reaps after this returns
    try:
        answer(reply, {"pid": pid}, [pidfd])
    finally:
        os.close(pidfd)


def answer(reply: int, msg: dict, fds: list[int]) -> None:
    """Send the zygote's reply; a host that gave up on the request (closed its end) is not an error."""
    with contextlib.suppress(OSError), socket.socket(fileno=os.dup(reply)) as s:
        socket.send_fds(s, [Wire.encode(msg)], fds)


def close_fds_except(keep: set[int]) -> None:
    for name in os.listdir("/proc/self/fd"):
        if int(name) not in keep:
            with contextlib.suppress(OSError):  # the listing's own fd is already closed
                os.close(int(name))
