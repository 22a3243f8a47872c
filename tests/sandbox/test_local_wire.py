"""The init's wire protocol: both ends name the same keys, and what one frames the other reads."""

from __future__ import annotations

import pytest

from ares.errors import SandboxCrashedError
from ares.sandbox.local import channel
from ares.sandbox.local.channel import ExecRequest, InitChannel, Reply
from ares.sandbox.local.init.wire import Wire

NAMES = [
    "OP",
    "STAGE",
    "ERROR",
    "OP_FDS",
    "OP_MAPPED",
    "OP_LIMITED",
    "STAGE_UNSHARED",
    "STAGE_FORKED",
    "STAGE_READY",
    "STAGE_ERROR",
    "EXIT_CODE",
    "TIMED_OUT",
    "DURATION_S",
    "STDOUT_LEN",
    "STDERR_LEN",
    "OUTPUT_DROPPED",
]


@pytest.mark.parametrize("name", NAMES)
def test_both_ends_name_the_same_keys(name: str) -> None:
    assert getattr(Wire, name) == getattr(channel, name)


def test_a_result_frame_reads_back_as_the_reply() -> None:
    frame = Wire.result(3, True, 1.5, b"out", b"err", dropped=7)
    assert InitChannel.decode_reply(frame) == Reply(3, True, 1.5, b"out", b"err", output_dropped=7)


def test_an_error_frame_reads_back_as_the_error() -> None:
    reply = InitChannel.decode_reply(Wire.error("OSError: boom"))
    assert reply is not None and reply.error == "OSError: boom"


@pytest.mark.parametrize("cut", [0, 1, 3])
def test_a_frame_cut_before_its_length_is_no_reply(cut: int) -> None:
    assert InitChannel.decode_reply(Wire.result(0, False, 0.0, b"", b"")[:cut]) is None


@pytest.mark.parametrize(
    "frame",
    [
        Wire.frame({"exit_code": 0}),  # keys missing
        b"\x00\x00\x00\x02xx",  # not marshal
        Wire.LENGTH.pack(2) + Wire.encode([1]),  # not a dict
    ],
)
def test_a_malformed_frame_is_a_crashed_sandbox(frame: bytes) -> None:
    with pytest.raises(SandboxCrashedError):
        InitChannel.decode_reply(frame)


def test_an_exec_request_carries_what_the_shepherd_reads() -> None:
    request = ExecRequest("ls", None, "/w", {"A": "1"}, 2.0, "nobody", 10, {"oom_score_adj": 500})
    msg = Wire.decode(InitChannel.encode_request(request))
    assert msg == {
        "op": "exec",
        "cmd": "ls",
        "argv": None,
        "cwd": "/w",
        "env": {"A": "1"},
        "timeout": 2.0,
        "user": "nobody",
        "output_limit": 10,
        "oom_score_adj": 500,
    }


def test_fds_go_in_batches_the_kernel_accepts() -> None:
    batches = InitChannel.fd_batches(list(range(450)))
    assert [len(fds) for _, fds in batches] == [200, 200, 50]
    assert all(Wire.decode(message) == {"op": "fds"} for message, _ in batches)
