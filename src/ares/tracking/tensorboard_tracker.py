"""A tracker that writes TensorBoard event files with tensorboardX (``pip install 'ares[tensorboard]'``).

tensorboardX is a small, maintained writer of TensorBoard's event format with no TensorFlow or
PyTorch dependency (numpy and protobuf only); TensorBoard itself (or any reader of the format)
shows the files: ``tensorboard --logdir DIR``.

Per-episode scalars are ``episode/<name>`` at step = episode index; run metrics (``run/*``,
``status/*``, ``latency/*``) are written at step 0; per-group ones are ``group/<name>`` at step =
group number, so a plot over steps reads across the groups.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ares.rollout.results import EpisodeResult, RunSummary
from ares.tracking.base import TrackingError
from ares.tracking.metrics import as_scalars, episode_metrics, group_metrics, run_metrics

EXTRA = "tensorboard"


class TensorBoardTracker:
    def __init__(self, logdir: str | Path, *, config: Mapping[str, Any] | None = None) -> None:
        try:
            from tensorboardX import SummaryWriter
        except ImportError:
            raise TrackingError(
                f"the tensorboard tracker needs tensorboardX: pip install 'ares[{EXTRA}]'"
            ) from None
        self.logdir = Path(logdir)
        self.logdir.mkdir(parents=True, exist_ok=True)
        self._writer = SummaryWriter(logdir=str(self.logdir))
        if config:
            self._writer.add_text("config", f"```\n{json.dumps(dict(config), indent=2, default=str)}\n```", 0)

    def log_episode(self, result: EpisodeResult) -> None:
        for name, value in episode_metrics(result).items():
            self._writer.add_scalar(f"episode/{name}", value, result.index)

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        for name, value in as_scalars(metrics).items():
            self._writer.add_scalar(name, value, step or 0)

    def log_summary(self, summary: RunSummary, results: Sequence[EpisodeResult] = ()) -> None:
        for name, value in run_metrics(summary, results).items():
            self._writer.add_scalar(name, value, 0)
        for group, row in group_metrics(summary, results).items():
            for name, value in row.items():
                self._writer.add_scalar(f"group/{name}", value, group)
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()
