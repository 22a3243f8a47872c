"""Ctrl-C (and SIGTERM) during ``ares run``: the episodes cancelled cleanly, and one line saying what
was kept and the command that continues the run.

SIGTERM is handled as SIGINT for the length of a run, so a ``kill`` or a CI timeout ends it the same
orderly way (running episodes cancelled, sandboxes stopped, a partial summary written) instead of
killing the process mid-write; the exit code says which signal it was (130 or 143).
"""

from __future__ import annotations

import shlex
import signal
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType


class Interruption:
    """Which signal stopped the run (SIGINT unless SIGTERM came): its exit code is 128 + it, as
    shells report a process a signal ended (130 for Ctrl-C)."""

    def __init__(self) -> None:
        self.signum: int = signal.SIGINT

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    def on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        """Do what Ctrl-C would: asyncio's handler cancels the running episodes; else (not in the
        event loop, or SIGINT ignored) a KeyboardInterrupt unwinds the run."""
        self.signum = signum
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler):
            handler(signal.SIGINT, frame)
            return
        raise KeyboardInterrupt


@contextmanager
def sigterm_as_interrupt() -> Iterator[Interruption]:
    """SIGTERM handled like SIGINT inside the block (on the main thread; elsewhere left as it is)."""
    interruption = Interruption()
    try:
        previous = signal.signal(signal.SIGTERM, interruption.on_sigterm)
    except ValueError:  # not the main thread: signals are not ours to take
        yield interruption
        return
    try:
        yield interruption
    finally:
        signal.signal(signal.SIGTERM, previous)


def resume_command(args: Sequence[str], out_dir: Path, out_given: bool) -> str:
    """The command line that was run, with ``--resume`` (and ``--out`` when it was not given)."""
    words = ["ares", *args]
    if not out_given:
        words += ["--out", str(out_dir)]
    if "--resume" not in args:
        words.append("--resume")
    return shlex.join(words)


def interrupted_line(kept: int, total: int, out_dir: Path, command: str) -> str:
    """The one line an interrupted run ends with."""
    episodes = out_dir / "episodes"
    return f"interrupted: kept {kept} of {total} episodes in {episodes}; continue with: {command}"
