"""A run's gate and trainer version inside a Ray actor, as the driver last set them.

The driver's ``PolicyGate`` and ``Staleness.current`` live in the driver's process and cannot be
called from an actor (a gate is a set of asyncio events on the driver's loop; ``current`` is
whatever callable the trainer passed, e.g. ``lambda: trainer.step``). So each actor keeps its own
gate and a copy of the version for every run, and the driver pushes changes (``relay.Relay``):
every episode of the actor passes the actor's gate and checks staleness against the copy, at
every step boundary, with no remote call per step. ``Control`` is what is pushed: the whole state
each time, so that applying it twice, or to a replacement actor, is harmless.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ares.errors import AresError
from ares.rollout.pause import PolicyGate
from ares.rollout.staleness import Staleness


@dataclass(frozen=True, slots=True)
class Control:
    """What the driver tells a run's actors: is there a gate and is it paused (and with which
    options of ``PolicyGate.pause``), how stale may an episode get (None: no bound) and the
    trainer's current version, or why it could not be read (``version_error``: what the driver's
    ``Staleness.current`` raised; every episode's next staleness check then fails with it, as a
    local run's would)."""

    gated: bool = False
    paused: bool = False
    max_staleness: int | None = None
    version: int | None = None
    preempt: bool = False
    release_after_s: float | None = None
    version_error: str | None = None


class VersionSourceError(AresError):
    """The trainer's version source (``Staleness.current``, called on the driver) raised."""


class RunControl:
    """One run's gate and version in an actor; ``gate`` and ``staleness`` go to every episode."""

    def __init__(self, control: Control) -> None:
        self.version, self.version_error = control.version, control.version_error
        self.gate = PolicyGate() if control.gated else None
        self.staleness = (
            None if control.max_staleness is None else Staleness(self.current, control.max_staleness)
        )

    def current(self) -> int | None:
        """The trainer's version as last pushed by the driver (``VersionSourceError`` if it could
        not read one)."""
        if self.version_error is not None:
            raise VersionSourceError(
                f"the trainer's version source raised on the driver: {self.version_error}"
            )
        return self.version

    async def apply(self, control: Control) -> None:
        """Take the driver's state: the version first (a resume releases episodes that must see
        it), then pause (returning once this actor has no policy call in flight) or resume."""
        self.version, self.version_error = control.version, control.version_error
        if self.gate is None:
            return
        if control.paused:
            await self.gate.pause(preempt=control.preempt, release_after_s=control.release_after_s)
        else:
            self.gate.resume()

    def stats(self) -> dict[str, Any]:
        """Where this actor stands: paused or not, policy calls in flight, the version it holds."""
        gate = self.gate
        return {
            "paused": gate is not None and gate.paused,
            "in_flight": 0 if gate is None else gate.in_flight,
            "version": self.version,
            "version_error": self.version_error,
        }

    def release(self) -> None:
        """The run is over here: nothing waits at its gate any more."""
        if self.gate is not None:
            self.gate.resume()
