"""Host-owned listening sockets inside a sandbox's network namespace (``LoopbackListener``).

An agent that runs inside a sandbox must reach one host service (the LLM proxy) and nothing else.
Rather than a route, a forwarder or a unix socket in the sandbox's files, the host owns a TCP socket
listening on 127.0.0.1 *in the sandbox's network namespace*: a socket keeps the namespace it was
created in, so connections to it come only from inside the sandbox, and the host serves them.

The socket is made by ``_listen.py``, a short-lived single-threaded helper: the host is
multi-threaded and may not change its user namespace, which an unprivileged host user must join
before the sandbox's netns. Used by the local and the docker backend (any namespace on this host).
"""

from __future__ import annotations

import asyncio
import contextlib
import marshal
import os
import socket
import sys
from pathlib import Path

from ares.errors import SandboxError, SandboxUnavailableError

HELPER = str(Path(__file__).with_name("_listen.py"))
#: How long the helper may take (an interpreter start and three syscalls: ~20 ms).
TIMEOUT_S = 10.0
STDERR_TAIL = 2000


def open_net_namespace(pid: int) -> int:
    """An fd (close-on-exec) of host process ``pid``'s network namespace.

    Raises SandboxError when the process is gone, SandboxUnavailableError when this user may not
    open it (the process belongs to another user, e.g. a rootful engine's container)."""
    try:
        return os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    except (FileNotFoundError, ProcessLookupError) as exc:
        raise SandboxError(f"the sandbox's process {pid} is gone") from exc
    except PermissionError as exc:
        raise SandboxUnavailableError(
            f"this user (uid {os.geteuid()}) may not enter the network namespace of process {pid}: "
            "it belongs to another user. Run ARES as the user that runs the sandboxes (root for a "
            "rootful engine)"
        ) from exc


def check_port(port: int) -> None:
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise SandboxError(f"port must be an int in 0..65535 (0: any free port), not {port!r}")


async def listen_in(net_ns: int, port: int = 0) -> socket.socket:
    """A non-blocking TCP socket listening on 127.0.0.1:``port`` in the network namespace ``net_ns``
    (an fd, which stays the caller's). Refuses the caller's own namespace: that would be the host's
    loopback, not the sandbox's."""
    check_port(port)
    if _same_file(os.fstat(net_ns), os.stat("/proc/thread-self/ns/net")):
        raise SandboxError(
            "the sandbox shares the host's network namespace; a loopback listener there would be "
            "the host's own port"
        )
    parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with parent:
        parent.setblocking(False)
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-I", "-S", HELPER, str(child.fileno()), str(net_ns), str(port),
                pass_fds=(child.fileno(), net_ns), env={}, cwd="/", stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
        finally:
            child.close()  # the helper's copy is its only one: EOF when it exits without answering
        fds: list[int] = []
        try:
            async with asyncio.timeout(TIMEOUT_S):
                data, fds = await _recv_with_fds(parent)
                _, err = await proc.communicate()
        except BaseException as exc:
            for fd in fds:
                os.close(fd)
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
            await asyncio.shield(proc.wait())
            if isinstance(exc, TimeoutError):
                raise SandboxError(
                    f"the loopback listener helper did not answer within {TIMEOUT_S}s"
                ) from exc
            raise
    return _accept_reply(data, fds, err, proc.returncode)


def _accept_reply(data: bytes, fds: list[int], err: bytes, code: int | None) -> socket.socket:
    """The helper's socket, checked to be what was asked for; else the helper's reason as an error."""
    try:
        msg = marshal.loads(data) if data else None
    except (EOFError, ValueError, TypeError):
        msg = None
    if not isinstance(msg, dict) or len(fds) != 1 or "error" in msg:
        for fd in fds:
            os.close(fd)
        if isinstance(msg, dict) and "error" in msg:
            raise SandboxError(f"cannot listen in the sandbox: {msg['error']}")
        tail = err.decode(errors="replace").strip()[-STDERR_TAIL:]
        raise SandboxError(f"the loopback listener helper failed (exit status {code}): {tail or 'no output'}")
    sock = socket.socket(fileno=fds[0])
    listening = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
    if sock.family != socket.AF_INET or sock.type != socket.SOCK_STREAM or not listening:
        sock.close()
        raise SandboxError(
            "the loopback listener helper returned something other than a listening TCP socket"
        )
    sock.setblocking(False)
    return sock


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


async def _recv_with_fds(sock: socket.socket) -> tuple[bytes, list[int]]:
    """One message and the fds it carries (close-on-exec) from a non-blocking socket; b"" at EOF."""
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(sock, 4096, 1, socket.MSG_CMSG_CLOEXEC)
        except BlockingIOError:
            await _readable(sock)
        except ConnectionResetError:
            return b"", []
        else:
            return data, fds


async def _readable(sock: socket.socket) -> None:
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()
    loop.add_reader(sock, lambda: ready.done() or ready.set_result(None))
    try:
        await ready
    finally:
        loop.remove_reader(sock)
