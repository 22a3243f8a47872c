"""A tracker that appends one JSON object per line to a file: needs no extra library."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ares.rollout.results import EpisodeResult, RunSummary
from ares.tracking.metrics import as_scalars, episode_metrics, group_metrics, group_task_ids, run_metrics


class JsonlTracker:
    """Appends records to ``path`` (its directory is created), one line each, flushed as written:

    - ``{"type": "run", "time", "config"}`` when the tracker opens;
    - ``{"type": "episode", "time", "index", "task_id", "group", "status", "metrics"}`` per episode;
    - ``{"type": "metrics", "time", "step", "metrics"}`` per :meth:`log_metrics` call;
    - ``{"type": "summary", "time", "metrics", "groups": [{"group", "task_id", "metrics"}]}`` at the end.

    Appending (not truncating) keeps the lines of an earlier run that ``--resume`` continues.
    """

    def __init__(self, path: str | Path, *, config: Mapping[str, Any] | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("a", encoding="utf-8")
        self._write({"type": "run", "config": dict(config or {})})

    def _write(self, record: dict[str, Any]) -> None:
        line = json.dumps({"type": record.pop("type"), "time": time.time(), **record}, default=str)
        self._file.write(line + "\n")
        self._file.flush()

    def log_episode(self, result: EpisodeResult) -> None:
        self._write(
            {
                "type": "episode",
                "index": result.index,
                "task_id": result.task_id,
                "group": result.group,
                "status": str(result.status),
                "metrics": episode_metrics(result),
            }
        )

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        self._write({"type": "metrics", "step": step, "metrics": as_scalars(metrics)})

    def log_summary(self, summary: RunSummary, results: Sequence[EpisodeResult] = ()) -> None:
        tasks = group_task_ids(summary)
        groups = [
            {"group": group, "task_id": tasks.get(group), "metrics": row}
            for group, row in group_metrics(summary, results).items()
        ]
        self._write({"type": "summary", "metrics": run_metrics(summary, results), "groups": groups})

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()
