"""Pid 1's loop: each exec request on the control socket is handed to a pre-forked shepherd, which
answers on the request's own reply socket. Standard library only."""

import contextlib
import os
import signal
import socket

from .commands import open_own_oom_score, refuse, shepherd
from .kernel import PR_SET_CHILD_SUBREAPER, libc
from .wire import Wire


def fork_shepherd(ctl: socket.socket, shell: str) -> socket.socket | None:
    """Fork the next shepherd ahead of time, so a command never waits for a fork of Python.

    None when nothing can be forked now (the pids or memory limit is reached); the caller retries.
    """
    init_end, shepherd_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        pid = os.fork()
    except OSError:
        init_end.close()
        shepherd_end.close()
        return None
    if pid:
        shepherd_end.close()
        return init_end
    try:
        init_end.close()
        ctl.close()
        open_own_oom_score()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        data, fds, _, _ = socket.recv_fds(shepherd_end, 1 << 20, 2)
        if data and fds:
            for fd in fds:
                os.set_inheritable(fd, False)
            with socket.socket(fileno=fds[0]) as reply:
                try:
                    shepherd(Wire.decode(data), reply, fds[1] if len(fds) > 1 else None, shell)
                except Exception as exc:
                    with contextlib.suppress(OSError):
                        reply.sendall(Wire.error(f"{type(exc).__name__}: {exc}"))
    finally:
        os._exit(0)


def hand_over(spare: socket.socket | None, data: bytes, fds: list[int]) -> bool:
    """Give a request to a spare shepherd; False if there is none or it was killed meanwhile."""
    if spare is None:
        return False
    try:
        socket.send_fds(spare, [data], fds)
    except OSError:
        return False
    finally:
        spare.close()
    return True


def serve(ctl: socket.socket, shell: str) -> None:
    spare = fork_shepherd(ctl, shell)
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(ctl, 1 << 20, 2)
        except InterruptedError:
            continue
        if not data:
            return
        if fds:
            if not hand_over(spare, data, fds):  # an agent may kill the spare (kill -9 -1)
                retry = fork_shepherd(ctl, shell)
                if not hand_over(retry, data, fds):
                    refuse(fds[0], "ares sandbox: cannot start the command: no process can be forked now\n")
            for fd in fds:
                os.close(fd)
            spare = fork_shepherd(ctl, shell)
