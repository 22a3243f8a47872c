"""The driver's side of a Ray run's results: records replayed once, then each result handed out.

An actor ships each episode's record events with its result; the driver replays them into the
run's collector, so records are written once, by the driver. An attempt that is played again
(``refills``) has its trajectory recorded but its result held back: the last attempt's result is
the episode's, and its trajectory supersedes the failed ones (``ares.records.loader``). Work that
no actor played becomes ``errored`` results, blamed on the infrastructure, with a record each.
"""

from __future__ import annotations

import secrets
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from ares.core.status import EpisodeStatus
from ares.envs.blame import error_blame, masked
from ares.records.collectors import TrajectoryCollector
from ares.records.model import EpisodeRecord, ErrorRecord
from ares.rollout.ray.buffer import replay
from ares.rollout.ray.fleet import first_line
from ares.rollout.ray.work import Played, Work
from ares.rollout.results import EpisodeResult

#: What a lost episode's record names as its environment when no attempt of it was recorded.
LOST_ENV: Mapping[str, Any] = {"class": "RayActor"}


class Results:
    """Results in the order they come, and the records of the run's collector."""

    def __init__(
        self,
        collector: TrajectoryCollector | None,
        on_result: Callable[[EpisodeResult], None] | None,
        keep_records: bool,
    ) -> None:
        self.collector, self.on_result, self.keep_records = collector, on_result, keep_records
        self.results: list[EpisodeResult] = []
        self._envs: dict[int, Mapping[str, Any]] = {}  # episode index -> its recorded environment

    def record(self, played: Played) -> None:
        """Replay ``played``'s record events (an attempt played again: its result is not kept)."""
        if self.collector is None:
            return
        for event in played.events:
            if event[0] == "begin" and isinstance(event[1].metadata.get("episode_index"), int):
                self._envs[event[1].metadata["episode_index"]] = event[1].env
        replay(played.events, self.collector)

    def deliver(self, played: Played, refills: int = 0) -> None:
        """Record ``played`` and hand out its results, counting ``refills`` plays before them."""
        self.record(played)
        for result in played.results:
            if refills:
                result = replace(result, refills=refills)
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
        blame = error_blame(error)  # a lost actor, no actor left: the infrastructure's
        results = []
        for index in work.indices:
            seed = work.seed + index - work.index
            record = {
                "status": str(EpisodeStatus.ERRORED), "error": info, "seed": seed, "blame": blame,
                "masked": masked(blame),
            }  # fmt: skip
            result = EpisodeResult(
                index=index, task_id=str(work.task), status=EpisodeStatus.ERRORED, reward=None, steps=0,
                duration_s=0.0, step_latencies_s=(), record=record, group=work.group, error=info,
                blame=blame,
            )  # fmt: skip
            results.append(result)
            if self.collector is not None:
                self._record_lost(work, index, info, record)
        self.deliver(Played(tuple(results), (), where), refills=work.refill)

    def _record_lost(self, work: Work, index: int, info: dict[str, Any], record: dict[str, Any]) -> None:
        assert self.collector is not None
        episode_id = secrets.token_hex(8)
        metadata: dict[str, Any] = {"episode_index": index, "lost": True}
        if work.group is not None:
            metadata["group_id"] = f"g{work.group}"
        now = time.time()
        env = dict(self._envs.get(index, LOST_ENV))  # as an earlier attempt's: it supersedes that one
        begun = EpisodeRecord(episode_id, None, record["seed"], env, now, metadata=metadata)
        self.collector.begin_episode(begun)
        self.collector.end_episode(
            episode_id, status="errored", ended_at=now, total_reward=None,
            error=ErrorRecord(info["type"], info["message"], info["traceback"]),
            metadata={"episode": record},
        )  # fmt: skip
