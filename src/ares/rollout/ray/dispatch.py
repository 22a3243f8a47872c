"""One run's work on a fleet: numbered like the local runner, kept in flight, results delivered once.

Every live actor holds up to ``slots`` units at once. A unit lost with its actor is queued again up
to ``retries`` times, then becomes ``errored`` results (and records) naming the actor; a dead actor
is replaced while replacements are left, and work no actor is left to run ends ``errored`` too.
"""

from __future__ import annotations

import asyncio
import secrets
import time
import traceback
from collections import deque
from collections.abc import Callable, Collection
from dataclasses import replace
from typing import Any

from ray.exceptions import RayActorError, RayError, RayTaskError

from ares import tracing
from ares.core.status import EpisodeStatus
from ares.records.collectors import TrajectoryCollector
from ares.records.model import EpisodeRecord, ErrorRecord
from ares.rollout.ray.buffer import replay
from ares.rollout.ray.fleet import Fleet, RayRunError, cause, first_line
from ares.rollout.ray.work import Played, Work
from ares.rollout.results import EpisodeResult


def plan(
    episodes: int, skip: Collection[int], k: int, branch_at: int | None, tasks: int, seed: int, run_id: str
) -> list[Work]:
    """The run's units, numbered as ``run_episodes`` numbers episodes (same tasks, same seeds)."""
    skipped = frozenset(skip)
    if branch_at is None:
        return [
            Work(i, (i // k) % tasks, seed + i, None if k == 1 else i // k, run_id)
            for i in range(episodes)
            if i not in skipped
        ]
    groups = [g for g in range((episodes + k - 1) // k) if g * k not in skipped]
    return [Work(g * k, g % tasks, seed + g * k, g, run_id, size=min(k, episodes - g * k)) for g in groups]


class Results:
    """The driver's side of the results: records replayed once, then the result handed out."""

    def __init__(
        self,
        collector: TrajectoryCollector | None,
        on_result: Callable[[EpisodeResult], None] | None,
        keep_records: bool,
    ) -> None:
        self.collector, self.on_result, self.keep_records = collector, on_result, keep_records
        self.results: list[EpisodeResult] = []

    def deliver(self, played: Played) -> None:
        if self.collector is not None:
            replay(played.events, self.collector)
        for result in played.results:
            if self.on_result is not None:
                self.on_result(result)
            self.results.append(result if self.keep_records else replace(result, record={}))

    def lost(self, work: Work, error: BaseException, where: str) -> None:
        """``work`` will not be played: one ``errored`` result and record per episode it held."""
        info = {
            "type": type(error).__name__,
            "message": f"{where}: {first_line(error)}",
            "traceback": "".join(traceback.format_exception(error)),
        }
        results = []
        for index in work.indices:
            seed = work.seed + index - work.index
            record = {"status": str(EpisodeStatus.ERRORED), "error": info, "seed": seed}
            result = EpisodeResult(
                index=index, task_id=str(work.task), status=EpisodeStatus.ERRORED, reward=None, steps=0,
                duration_s=0.0, step_latencies_s=(), record=record, group=work.group, error=info,
            )  # fmt: skip
            results.append(result)
            if self.collector is not None:
                self._record_lost(work, index, info, record)
        self.deliver(Played(tuple(results), (), where))

    def _record_lost(self, work: Work, index: int, info: dict[str, Any], record: dict[str, Any]) -> None:
        assert self.collector is not None
        episode_id = secrets.token_hex(8)
        metadata: dict[str, Any] = {"episode_index": index, "lost": True}
        if work.group is not None:
            metadata["group_id"] = f"g{work.group}"
        now = time.time()
        self.collector.begin_episode(
            EpisodeRecord(episode_id, None, record["seed"], {"class": "RayActor"}, now, metadata=metadata)
        )
        self.collector.end_episode(
            episode_id, status="errored", ended_at=now, total_reward=None,
            error=ErrorRecord(info["type"], info["message"], info["traceback"]),
            metadata={"episode": record},
        )  # fmt: skip


async def dispatch(fleet: Fleet, queue: deque[Work], slots: int, retries: int, results: Results) -> None:
    """Keep ``slots`` units in flight on every live actor until the queue is empty."""
    dead: set[str] = set()

    async def serve(name: str, slot: int) -> None:
        handle = fleet.live[name]
        track = f"{name} slot {slot}"
        while queue and name not in dead:
            work = queue.popleft()
            try:
                with tracing.span(
                    "dispatch", cat="dispatch", track=track, flows_out=(work.dispatch_flow,),
                    index=work.index, attempt=work.attempt,
                ):  # fmt: skip
                    played = await handle.play.remote(work)
            except RayActorError as exc:
                if work.attempt < retries:
                    queue.appendleft(work.retried())
                else:
                    results.lost(work, exc, f"Ray actor {name} died")
                if name not in dead:
                    dead.add(name)
                    await respawn(name)
                return
            except RayTaskError as exc:  # the actor raised outside an episode (e.g. make_env failed)
                results.lost(work, cause(exc), f"Ray actor {name}")
                continue
            except RayError as exc:  # the result itself was lost (e.g. its object store died)
                results.lost(work, exc, f"Ray actor {name}")
                continue
            with tracing.span("result", cat="result", track=track, flows_in=(work.result_flow,)):
                results.deliver(played)

    async def respawn(name: str) -> None:
        # Replaced even when no work is queued: the fleet outlives this run, and the next run must
        # neither send work to the dead actor nor run one actor short.
        new = await fleet.replace(name)
        if new is not None and queue:
            for slot in range(slots):
                group.create_task(serve(new, slot))

    async with asyncio.TaskGroup() as group:
        for name in list(fleet.live):
            for slot in range(slots):
                group.create_task(serve(name, slot))
    while queue:  # every actor died and none could replace it
        results.lost(queue.popleft(), RayRunError("no Ray actor left"), "not played")
