"""The host's end of the sandbox init's wire protocol (``init/wire.py`` is the other end).

Two kinds of frame, both marshal (the init must not import json, see _init.py):
- the control socket (SOCK_SEQPACKET) carries one dict per packet, fds passed alongside;
- each command answers on its own reply socket (a stream): a 4-byte length, a header dict, then
  stdout and stderr bytes (``Reply``).
Only ARES's own processes hold the other ends; a malformed frame means a crashed sandbox.
"""

from __future__ import annotations

import asyncio
import marshal
import os
import select
import socket
import struct
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ares.errors import SandboxCrashedError
from ares.sandbox.base import ExecResult

#: What the host sends on the control socket (``op``), and the init's start-up stages (``stage``).
OP, STAGE, ERROR = "op", "stage", "error"
OP_FDS, OP_MAPPED, OP_LIMITED, OP_EXEC = "fds", "mapped", "limited", "exec"
STAGE_UNSHARED, STAGE_FORKED, STAGE_READY, STAGE_ERROR = "unshared", "forked", "ready", "error"
#: The keys of a reply's header.
EXIT_CODE, TIMED_OUT, DURATION_S = "exit_code", "timed_out", "duration_s"
STDOUT_LEN, STDERR_LEN, OUTPUT_DROPPED = "stdout_len", "stderr_len", "output_dropped"
HEADER_KEYS = (EXIT_CODE, TIMED_OUT, DURATION_S, STDOUT_LEN, STDERR_LEN, OUTPUT_DROPPED, ERROR)
#: File descriptors per control message (the kernel takes at most 253).
FDS_PER_MESSAGE = 200
_LENGTH = struct.Struct("!I")


@dataclass(frozen=True, slots=True)
class ExecRequest:
    """One command for the init to hand to a shepherd (``init/commands.py``'s ``shepherd`` reads it)."""

    cmd: str
    argv: list[str] | None
    cwd: str
    env: dict[str, str]
    timeout: float | None
    user: str | None
    output_limit: int | None
    #: What the sandbox's limits add (rlimits, the command's oom_score_adj).
    limits: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Reply:
    """A command's outcome as its shepherd framed it."""

    exit_code: int
    timed_out: bool
    duration_s: float
    stdout: bytes
    stderr: bytes
    output_dropped: int = 0
    #: Why the shepherd could not run the command at all (the other fields are then empty).
    error: str | None = None

    def result(self) -> ExecResult:
        return ExecResult(
            stdout=self.stdout.decode(errors="replace"),
            stderr=self.stderr.decode(errors="replace"),
            exit_code=self.exit_code,
            timed_out=self.timed_out,
            duration_s=self.duration_s,
        )


class InitChannel:
    """The control socket to one sandbox's init (messages out with fds, start-up stages in), and the
    framing of every message and reply."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    @staticmethod
    def encode(msg: Mapping[str, Any]) -> bytes:
        return marshal.dumps(dict(msg))

    @staticmethod
    def decode(data: bytes) -> dict[str, Any]:
        """A dict the init sent; anything else means the sandbox is broken."""
        try:
            msg = marshal.loads(data)
        except (EOFError, ValueError, TypeError) as exc:
            raise SandboxCrashedError(f"the sandbox init sent a malformed message: {exc}") from exc
        if not isinstance(msg, dict):
            raise SandboxCrashedError(f"the sandbox init sent a malformed message: {type(msg).__name__}")
        return msg

    @classmethod
    def encode_request(cls, request: ExecRequest) -> bytes:
        fields = {
            "cmd": request.cmd,
            "argv": request.argv,
            "cwd": request.cwd,
            "env": request.env,
            "timeout": request.timeout,
            "user": request.user,
            "output_limit": request.output_limit,
        }
        return cls.encode({OP: OP_EXEC, **fields, **request.limits})

    @classmethod
    def decode_reply(cls, frame: bytes) -> Reply | None:
        """The reply in ``frame``; None when the frame is cut short (its shepherd died first)."""
        if len(frame) < _LENGTH.size:
            return None
        (size,) = _LENGTH.unpack_from(frame)
        header = cls.decode(frame[_LENGTH.size : _LENGTH.size + size])
        if ERROR in header:
            return Reply(0, False, 0.0, b"", b"", error=str(header[ERROR]))
        body = frame[_LENGTH.size + size :]
        try:
            out_len = int(header[STDOUT_LEN])
            return Reply(
                exit_code=int(header[EXIT_CODE]),
                timed_out=bool(header[TIMED_OUT]),
                duration_s=float(header[DURATION_S]),
                stdout=body[:out_len],
                stderr=body[out_len:],
                output_dropped=int(header.get(OUTPUT_DROPPED) or 0),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise SandboxCrashedError(f"the sandbox init sent a malformed reply: {header!r}") from exc

    @staticmethod
    async def exchange(
        send: Callable[[bytes, Sequence[int]], Awaitable[None]],
        request: bytes,
        stdin: bytes | None,
        reply_within_s: float | None,
    ) -> bytes:
        """Send an encoded exec ``request`` with ``send`` (the sandbox's, onto the control socket),
        passing a fresh reply socket and ``stdin`` as a memfd, and return the reply frame; raises
        TimeoutError when none came within ``reply_within_s``."""
        reply, child_reply = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        with reply:
            fds = [child_reply.fileno()]
            stdin_fd = None if stdin is None else await _stdin_memfd(stdin)
            if stdin_fd is not None:
                fds.append(stdin_fd)
            try:
                await send(request, fds)
            finally:
                child_reply.close()
                if stdin_fd is not None:
                    os.close(stdin_fd)
            reply.setblocking(False)
            return await asyncio.wait_for(_read_all(reply), reply_within_s)

    async def send(self, data: bytes, fds: Sequence[int] = ()) -> None:
        """Send one encoded message; raises ``ConnectionError`` when the init is gone."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                if fds:
                    socket.send_fds(self._sock, [data], list(fds))
                else:
                    self._sock.send(data)
                return
            except BlockingIOError:
                writable = loop.create_future()
                loop.add_writer(self._sock, writable.set_result, None)
                try:
                    await writable
                finally:
                    loop.remove_writer(self._sock)

    @classmethod
    def fd_batches(cls, fds: Sequence[int]) -> list[tuple[bytes, Sequence[int]]]:
        """Messages that pass ``fds`` in batches the kernel accepts (the init collects them in order)."""
        message = cls.encode({OP: OP_FDS})
        return [(message, fds[i : i + FDS_PER_MESSAGE]) for i in range(0, len(fds), FDS_PER_MESSAGE)]

    async def recv(self) -> dict[str, Any] | None:
        """The init's next message; None once it closed its end."""
        try:
            data = await asyncio.get_running_loop().sock_recv(self._sock, 1 << 16)
        except ConnectionResetError:
            data = b""
        return self.decode(data) if data else None

    def alive(self) -> bool:
        """Whether pid 1 still holds its end (it closes when pid 1 dies)."""
        poller = select.poll()
        poller.register(self._sock, select.POLLIN | select.POLLHUP | select.POLLERR)
        return not poller.poll(0)

    def close(self) -> None:
        self._sock.close()


async def _read_all(sock: socket.socket) -> bytes:
    """Everything a command's reply socket (non-blocking) carries until its shepherd closes it."""
    loop = asyncio.get_running_loop()
    chunks = []
    while chunk := await loop.sock_recv(sock, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


async def _stdin_memfd(stdin: bytes) -> int:
    """A memfd holding ``stdin``, at offset 0 (large inputs are written off the event loop)."""
    fd = os.memfd_create("stdin")
    try:
        if len(stdin) < (1 << 16):
            os.write(fd, stdin)
        else:
            await asyncio.to_thread(os.write, fd, stdin)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd
