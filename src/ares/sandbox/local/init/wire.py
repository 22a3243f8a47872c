"""The init's end of the wire protocol with the host (``ares.sandbox.local.channel`` is the host's):
marshal dicts on the control socket, and each command's reply frame. Standard library only."""

import marshal
import socket
import struct


class Wire:
    """This end of the host's wire protocol (``channel.py`` is the host's): marshal dicts on the
    control socket, and a command's reply frame (a 4-byte length, a header, stdout, stderr)."""

    OP, STAGE, ERROR = "op", "stage", "error"
    OP_FDS, OP_MAPPED, OP_LIMITED = "fds", "mapped", "limited"
    STAGE_UNSHARED, STAGE_FORKED, STAGE_READY, STAGE_ERROR = "unshared", "forked", "ready", "error"
    EXIT_CODE, TIMED_OUT, DURATION_S = "exit_code", "timed_out", "duration_s"
    STDOUT_LEN, STDERR_LEN, OUTPUT_DROPPED = "stdout_len", "stderr_len", "output_dropped"
    LENGTH = struct.Struct("!I")

    encode = staticmethod(marshal.dumps)
    decode = staticmethod(marshal.loads)

    @classmethod
    def send(cls, sock: socket.socket, msg: dict) -> None:
        sock.send(cls.encode(msg))

    @classmethod
    def stage(cls, sock: socket.socket, stage: str, **fields: object) -> None:
        """Tell the host how far start-up got."""
        cls.send(sock, {cls.STAGE: stage, **fields})

    @classmethod
    def recv(cls, sock: socket.socket, fds: list[int]) -> dict:
        """The next message that is not an fd batch; fd batches are appended to ``fds``."""
        while True:
            data, got, _, _ = socket.recv_fds(sock, 1 << 20, 250)
            if not data:
                raise EOFError("host closed the control socket")
            msg = cls.decode(data)
            if msg.get(cls.OP) != cls.OP_FDS:
                return msg
            fds.extend(got)

    @classmethod
    def frame(cls, header: dict, stdout: bytes = b"", stderr: bytes = b"") -> bytes:
        data = cls.encode(header)
        return cls.LENGTH.pack(len(data)) + data + stdout + stderr

    @classmethod
    def result(
        cls, exit_code: int, timed_out: bool, duration_s: float, out: bytes, err: bytes, dropped: int = 0
    ) -> bytes:
        """The reply frame of a command that ran (or failed to start, exit code 126)."""
        header = {
            cls.EXIT_CODE: exit_code,
            cls.TIMED_OUT: timed_out,
            cls.DURATION_S: duration_s,
            cls.STDOUT_LEN: len(out),
            cls.STDERR_LEN: len(err),
            cls.OUTPUT_DROPPED: dropped,
        }
        return cls.frame(header, out, err)

    @classmethod
    def error(cls, message: str) -> bytes:
        """The reply frame of a shepherd that could not run its command at all."""
        return cls.frame({cls.ERROR: message})
