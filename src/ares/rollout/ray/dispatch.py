"""One run's work on a fleet: numbered like the local runner, kept in flight, results delivered once.

Every live actor holds up to ``slots`` units at once. The driver decides what is played again
(``Replays``): a unit lost with its actor up to ``retries`` times, and an episode whose failure is
the infrastructure's (blame ``infra``: a sandbox that would not start, an unreachable policy
server, a stale episode, its actor lost once the retries are spent) up to ``refills`` times, with
the same index, task and seed. What is not played again becomes its results; a dead actor is
replaced while replacements are left, and work no actor is left to run ends ``errored`` too.
``before_episode(index)`` is awaited before each episode is first sent (a consumer's backpressure).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import ray
from ray.exceptions import RayActorError, RayError, RayTaskError

from ares import tracing
from ares.rollout.ray.delivery import Results
from ares.rollout.ray.fleet import Fleet, RayRunError, cause
from ares.rollout.ray.work import Played, Work


def plan(
    episodes: int,
    skip: Collection[int],
    k: int,
    branch_at: int | None,
    tasks: int,
    seed: int,
    run_id: str,
    group_tasks: Sequence[int] | None = None,
) -> list[Work]:
    """The run's units, numbered as ``run_episodes`` numbers episodes (same tasks, same seeds): group
    g plays ``group_tasks[g]`` when given, else task g % ``tasks``."""
    skipped = frozenset(skip)

    def task_of(group: int) -> int:
        return group % tasks if group_tasks is None else group_tasks[group]

    if branch_at is None:
        return [
            Work(i, task_of(i // k), seed + i, None if k == 1 else i // k, run_id)
            for i in range(episodes)
            if i not in skipped
        ]
    groups = [g for g in range((episodes + k - 1) // k) if g * k not in skipped]
    return [Work(g * k, task_of(g), seed + g * k, g, run_id, size=min(k, episodes - g * k)) for g in groups]


@dataclass(frozen=True, slots=True)
class Replays:
    """When the driver plays a unit again: ``retries`` times after its actor died, ``refills``
    times (single episodes only) after a failure blamed on the infrastructure."""

    retries: int = 0
    refills: int = 0

    def after_loss(self, work: Work, *, died: bool) -> Work | None:
        """What to queue after ``work`` was lost (``died``: with its actor), or None: it is lost."""
        if died and work.attempt < self.retries:
            return work.retried()
        return self._refill(work)

    def after_play(self, work: Work, played: Played) -> Work | None:
        """What to queue after ``work`` was played, or None: its results are the episode's."""
        if played.results and played.results[0].blame == "infra":
            return self._refill(work)
        return None

    def _refill(self, work: Work) -> Work | None:
        return work.refilled() if work.size == 1 and work.refill < self.refills else None


class _Pending:
    """Units waiting and units in flight: a slot waits for work while a unit in flight may still
    come back to be played again."""

    def __init__(self, work: Iterable[Work]) -> None:
        self.queue = deque(work)
        self.in_flight = 0
        self._changed = asyncio.Event()

    async def take(self) -> Work | None:
        """The next unit (now in flight), or None once nothing is left to play."""
        while not self.queue and self.in_flight:
            self._changed.clear()
            await self._changed.wait()
        if not self.queue:
            return None
        self.in_flight += 1
        return self.queue.popleft()

    def done(self, again: Work | None) -> None:
        """A unit in flight came back; ``again`` (if any) is queued first, to be played next."""
        self.in_flight -= 1
        if again is not None:
            self.queue.appendleft(again)
        self._changed.set()


async def dispatch(
    fleet: Fleet,
    work: Iterable[Work],
    slots: int,
    results: Results,
    replays: Replays = Replays(),
    before_episode: Callable[[int], Awaitable[None]] | None = None,
) -> None:
    """Keep ``slots`` units in flight on every live actor until nothing is left to play."""
    dead: set[str] = set()
    pending = _Pending(work)

    async def serve(name: str, slot: int) -> None:
        handle = fleet.live[name]
        track = f"{name} slot {slot}"
        while name not in dead and (unit := await pending.take()) is not None:
            again: Work | None = unit  # put back if this slot is stopped before it comes back
            try:
                again = await one(name, handle, unit, track)
            finally:
                pending.done(again)

    async def one(name: str, handle: Any, work: Work, track: str) -> Work | None:
        """Play ``work`` on actor ``name``; what to queue again, if anything."""
        if name in dead:
            return work  # the actor died while this slot waited: another one plays it
        if before_episode is not None and work.attempt == work.refill == 0:
            await before_episode(work.index)
        try:
            with tracing.span(
                "dispatch", cat="dispatch", track=track, flows_out=(work.dispatch_flow,),
                index=work.index, attempt=work.attempt, refill=work.refill,
            ):  # fmt: skip
                played = await _played(handle.play.remote(work))
        except RayActorError as exc:
            if name not in dead:
                dead.add(name)
                # Replaced even when nothing is left to play: the fleet outlives this run, and the
                # next run must neither send work to the dead actor nor run one actor short.
                group.create_task(respawn(name))
            return settle(work, exc, f"Ray actor {name} died", died=True)
        except RayTaskError as exc:  # the actor raised outside an episode (e.g. make_env failed)
            return settle(work, cause(exc), f"Ray actor {name}", died=False)
        except RayError as exc:  # the result itself was lost (e.g. its object store died)
            return settle(work, exc, f"Ray actor {name}", died=False)
        with tracing.span("result", cat="result", track=track, flows_in=(work.result_flow,)):
            again = replays.after_play(work, played)
            if again is None:
                results.deliver(played, refills=work.refill)
            else:
                results.record(played)  # the failed attempt's trajectory; the next supersedes it
        return again

    def settle(work: Work, error: BaseException, where: str, *, died: bool) -> Work | None:
        again = replays.after_loss(work, died=died)
        if again is None:
            results.lost(work, error, where)
        return again

    async def respawn(name: str) -> None:
        new = await fleet.replace(name)
        if new is not None:
            for slot in range(slots):
                group.create_task(serve(new, slot))

    async with asyncio.TaskGroup() as group:
        for name in list(fleet.live):
            for slot in range(slots):
                group.create_task(serve(name, slot))
    while pending.queue:  # every actor died and none could replace it
        results.lost(pending.queue.popleft(), RayRunError("no Ray actor left"), "not played")


async def _played(ref: ray.ObjectRef) -> Played:
    """Await an actor's answer; cancelled, the episode on the actor is cancelled too."""
    try:
        return await ref
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            ray.cancel(ref)
        raise
