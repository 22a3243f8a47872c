"""The states of a local sandbox, and who may move it between them.

    stopped --start()--> started <--exec()--> busy (while n commands run)
    started --snapshot()--> snapshotting --> started (or crashed, when the restart fails)
    started | busy --the init died or stopped answering--> crashed (files kept for fork_frozen)
    any --stop(), commit(), a fork, a snapshot's kill--> stopped (a crash stays a crash)

The sandbox calls ``halting()`` when it starts killing its processes and ``halted()`` once they are
dead; ``crash`` may land in between.

Only ``sandbox.py`` changes the state: ``start``/``stop`` and its crash detection (``crash`` is
called where a crash is seen, never inferred from a message), ``exec`` through ``running_command()``
and ``snapshot`` through ``taking_snapshot()``. Everything else reads it (``phase``, ``crashed``);
the two context managers also turn a wrong state into the error a caller sees.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Iterator

from ares.errors import SandboxError

STOPPED_MESSAGE = "the sandbox was stopped"
NOT_STARTED = "the sandbox is not running; call start() first"


class Phase(enum.Enum):
    STOPPED = "stopped"
    STARTED = "started"
    BUSY = "busy"
    SNAPSHOTTING = "snapshotting"
    CRASHED = "crashed"


class SandboxState:
    """Whether the init runs (or crashed, and why), commands in flight, a snapshot in progress."""

    def __init__(self) -> None:
        self._life = Phase.STOPPED  # STOPPED, STARTED or CRASHED; busy and snapshotting lie on top
        self._reason: str | None = None  # why it does not run: its crash, or that it was stopped
        self._busy = 0
        self._snapshotting = False

    @property
    def phase(self) -> Phase:
        if self._snapshotting:
            return Phase.SNAPSHOTTING
        if self._life is Phase.STARTED and self._busy:
            return Phase.BUSY
        return self._life

    @property
    def running(self) -> bool:
        return self._life is Phase.STARTED

    @property
    def busy(self) -> int:
        return self._busy

    @property
    def snapshotting(self) -> bool:
        return self._snapshotting

    @property
    def crashed(self) -> str | None:
        """Why the sandbox died on its own (None while it runs or after a plain stop)."""
        return self._reason if self._life is Phase.CRASHED else None

    def why_not_running(self, default: str = NOT_STARTED) -> str:
        return self._reason or default

    # ------------------------------------------------------------------ transitions (sandbox.py)
    def starting(self) -> None:
        """A start (or a snapshot's restart) begins: how the last run ended no longer applies."""
        self._life, self._reason = Phase.STOPPED, None

    def launched(self) -> None:
        """The init answers on its control socket."""
        self._life = Phase.STARTED

    def crash(self, reason: str) -> None:
        """The init died or stopped answering. The first reason sticks, and a stopped sandbox did
        not crash (its processes were killed on purpose)."""
        if self._reason is None:
            self._life, self._reason = Phase.CRASHED, reason

    def halting(self) -> None:
        """Its processes are being killed: no command starts from now on."""
        if self._life is Phase.STARTED:
            self._life = Phase.STOPPED

    def halted(self) -> None:
        """Every process is dead (stop, commit, a fork, a snapshot): stopped, unless a crash was
        seen first (a command that lost its shepherd while ``halting`` also reports one)."""
        if self._life is not Phase.CRASHED:
            self._life, self._reason = Phase.STOPPED, self._reason or STOPPED_MESSAGE

    @contextlib.contextmanager
    def running_command(self) -> Iterator[None]:
        """One command in flight (a snapshot waits for none)."""
        if self._snapshotting:
            raise SandboxError("the sandbox is being snapshotted; run commands after snapshot() returns")
        if not self.running:
            raise SandboxError(self.why_not_running())
        self._busy += 1
        try:
            yield
        finally:
            self._busy -= 1

    @contextlib.contextmanager
    def taking_snapshot(self) -> Iterator[None]:
        """A snapshot kills, freezes and restarts the sandbox: no command may start meanwhile."""
        if self._snapshotting:
            raise SandboxError("a snapshot of this sandbox is already being taken")
        if not self.running:
            raise SandboxError(self.why_not_running("the sandbox is not running"))
        if self._busy:
            raise SandboxError(
                f"cannot snapshot while {self._busy} command(s) run in the sandbox: snapshots are taken "
                "between commands (await them first)"
            )
        self._snapshotting = True
        try:
            yield
        finally:
            self._snapshotting = False
