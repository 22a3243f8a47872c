"""Sandboxes freed during a long pause: one held episode's release, and its way back.

A held episode's environment is released in the episode's own task (``PolicyGate`` calls these),
so a cancelled run unwinds through it like through any other wait: its environment's ``close()``
then removes the snapshot. An environment that cannot release keeps its sandbox, and the refusal
is recorded (``Release.reason``; a ``CodeEnvironment`` also notes it in its episode's metadata).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ares import tracing
from ares.core.episodic import episodic
from ares.core.releasing import ReleasingEnvironment
from ares.errors import SnapshotError


@dataclass(frozen=True, slots=True)
class Release:
    """What a long pause did to one held episode's sandbox: ``released``, or kept and why."""

    episode_id: str | None
    step: int | None
    released: bool
    reason: str | None = None


async def release(env: Any) -> Release:
    """Release ``env``'s sandbox (``ReleasingEnvironment``); a refusal is the outcome, not an error."""
    episode = episodic(env).episode
    episode_id, step = (None, None) if episode is None else (episode.id, episode.steps)
    if not isinstance(env, ReleasingEnvironment):
        reason = f"{type(env).__name__} cannot release its sandbox (it has no release()): kept"
        return Release(episode_id, step, released=False, reason=reason)
    with tracing.span("sandbox.release", cat="env", episode=episode_id, step=step) as span:
        try:
            await env.release()
        except SnapshotError as exc:
            span.set("kept", str(exc))
            return Release(episode_id, step, released=False, reason=str(exc))
    return Release(episode_id, step, released=True)


async def reacquire(env: Any) -> None:
    """Bring ``env``'s released sandbox back, at the step it was released at."""
    with tracing.span("sandbox.reacquire", cat="env"):
        await env.reacquire()
