"""The validation report: one JSON file, rewritten as each task is judged, read back to resume.

It names its source (preset, path, split, image template, verifier mode): resuming a report with
another source is refused, since its verdicts would be about other tasks. Tasks that errored are run
again on resume (an error says nothing about the task); the others are kept as judged.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ares.errors import AresError
from ares.validation.task_report import TaskReport
from ares.validation.verdict import VERDICTS, TaskValidation

REPORT_NAME = "validation.json"
FORMAT = "ares-task-validation/1"


class ReportError(AresError):
    """A report that cannot be read or resumed (unreadable, another format, another source)."""


@dataclass
class ValidationReport(TaskReport):
    """The verdicts so far, by task id (in the order they were judged), and what they were run on."""

    @classmethod
    def resume(cls, path: Path, source: dict[str, Any], settings: dict[str, Any]) -> ValidationReport:
        """The report at ``path`` to continue (a new one if there is none); ``source`` must match."""
        return cls.read(path, FORMAT, source, settings, ReportError)

    def record(self, verdict: TaskValidation) -> None:
        self.tasks.pop(verdict.task_id, None)  # an errored task run again: its new verdict, last
        self.tasks[verdict.task_id] = verdict.to_dict()

    def record_policy(self, policy: str, outcomes: dict[str, list[bool | None]]) -> None:
        """Each judged task's outcomes under ``policy`` (``--policy SPEC``): ``policy``,
        ``policy_outcomes`` and ``policy_pass_rate`` (None when no run could be scored), what a
        curriculum is seeded from."""
        self.settings["policy"] = policy
        for task_id, runs in outcomes.items():
            item = self.tasks.get(task_id)
            if item is None:
                continue
            scored = [run for run in runs if run is not None]
            item["policy"] = policy
            item["policy_outcomes"] = runs
            item["policy_pass_rate"] = sum(scored) / len(scored) if scored else None

    def measured(self, policy: str, repeats: int) -> set[str]:
        """Tasks whose outcomes under ``policy`` are all in: ``repeats`` runs, none masked (a resumed
        measurement skips them; a task measured under another policy, or with masked runs, runs again)."""
        return {
            task_id
            for task_id, item in self.tasks.items()
            if item.get("policy") == policy
            and len(runs := item.get("policy_outcomes") or ()) == repeats
            and None not in runs
        }

    def counts(self) -> dict[str, int]:
        found = Counter(item["verdict"] for item in self.tasks.values())
        return {"tasks": len(self.tasks), **{verdict: found[verdict] for verdict in VERDICTS}}

    def bad(self) -> list[dict[str, Any]]:
        return [item for item in self.tasks.values() if item["verdict"] != "good"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "source": self.source,
            "settings": self.settings,
            "summary": {**self.counts(), "task_seconds": self.task_seconds()},
            "wall_time_s": round(self.wall_time_s, 3),
            "tasks": list(self.tasks.values()),
        }
