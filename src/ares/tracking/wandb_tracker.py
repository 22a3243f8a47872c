"""A Weights & Biases tracker, always offline (``pip install 'ares[wandb]'``).

The run is written under ``DIR/wandb/offline-run-*`` and never sent anywhere: ``WANDB_MODE`` is set
to ``offline`` for the process and the run is started with ``mode="offline"``; W&B's own error
reporting is off. Upload later, if wanted, with ``wandb sync DIR/wandb/offline-run-*``.

Per-episode metrics are ``episode/<name>`` against ``episode/index``; the run's metrics (flat, with
``group/<g>/<name>`` for each group) go to the run summary, and the groups also to a ``groups`` table.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ares.rollout.results import EpisodeResult, RunSummary
from ares.tracking.base import TrackingError
from ares.tracking.metrics import as_scalars, episode_metrics, flat_metrics, group_metrics, group_task_ids

EXTRA = "wandb"


class WandbTracker:
    def __init__(
        self,
        project: str,
        dir: str | Path = ".",
        *,
        config: Mapping[str, Any] | None = None,
        name: str | None = None,
    ) -> None:
        try:
            import wandb
        except ImportError:
            raise TrackingError(f"the wandb tracker needs wandb: pip install 'ares[{EXTRA}]'") from None
        os.environ["WANDB_MODE"] = "offline"  # never network, whatever the user's settings say
        os.environ["WANDB_ERROR_REPORTING"] = "false"
        self.dir = Path(dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._wandb = wandb
        settings = wandb.Settings(
            mode="offline", console="off", silent=True, x_disable_stats=True, disable_git=True,
            save_code=False, disable_job_creation=True, x_save_requirements=False,
        )  # fmt: skip
        self.run = wandb.init(
            project=project, dir=str(self.dir), config=dict(config or {}), name=name, mode="offline",
            settings=settings, reinit="create_new",
        )  # fmt: skip
        self.run.define_metric("episode/index")
        self.run.define_metric("episode/*", step_metric="episode/index")

    def log_episode(self, result: EpisodeResult) -> None:
        metrics = {f"episode/{k}": v for k, v in episode_metrics(result).items()}
        self.run.log({**metrics, "episode/index": result.index})

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        scalars = as_scalars(metrics)
        if step is not None:
            scalars["step"] = float(step)
        self.run.log(scalars)

    def log_summary(self, summary: RunSummary, results: Sequence[EpisodeResult] = ()) -> None:
        self.run.summary.update(flat_metrics(summary, results))
        groups = group_metrics(summary, results)
        if groups:
            tasks = group_task_ids(summary)
            columns = sorted({key for row in groups.values() for key in row})
            table = self._wandb.Table(columns=["group", "task_id", *columns])
            for group, row in groups.items():
                table.add_data(group, tasks.get(group), *(row.get(c) for c in columns))
            self.run.log({"groups": table})

    def close(self) -> None:
        self.run.finish()
