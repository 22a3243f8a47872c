"""The report file of a check run task by task (``validation.json``, and the audit's ``audit.json``).

One JSON document of per-task results, by task id, next to what they were run on; rewritten whole
as each task is judged, so an interrupted run keeps every task it finished.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from ares.errors import AresError


@dataclass
class TaskReport:
    """The results so far, by task id (in the order they were judged), and what they were run on.

    Subclasses write the document (``to_dict``); ``save`` puts it on disk.
    """

    path: Path
    source: dict[str, Any]
    settings: dict[str, Any] = field(default_factory=dict)
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    wall_time_s: float = 0.0

    @classmethod
    def read(
        cls, path: Path, fmt: str, source: dict[str, Any], settings: dict[str, Any], error: type[AresError]
    ) -> Self:
        """The report at ``path`` to continue with ``settings`` (a new one if there is none): it must
        be of format ``fmt`` and about ``source``, else ``error`` says why it cannot be resumed."""
        if not path.exists():
            return cls(path, source, settings)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("format") != fmt:
                raise error(f"{path} is not a report of format {fmt}")
            tasks = {str(item["task_id"]): dict(item) for item in data["tasks"]}
            earlier, wall = data["source"], float(data.get("wall_time_s", 0.0))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise error(f"cannot resume {path}: {type(exc).__name__}: {exc}") from None
        if earlier != source:
            raise error(
                f"cannot resume {path}: it is about {_describe(earlier)}, not {_describe(source)}; "
                "choose another --out"
            )
        return cls(path, source, settings, tasks, wall)

    @classmethod
    def resume(cls, path: Path, source: dict[str, Any], settings: dict[str, Any]) -> Self:
        """The report at ``path`` to continue (subclasses: ``read`` with their format and checks)."""
        raise NotImplementedError

    @property
    def finished(self) -> set[str]:
        """Tasks judged for good: every verdict but ``errored`` (an error says nothing about the task)."""
        return {task_id for task_id, item in self.tasks.items() if item["verdict"] != "errored"}

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def task_seconds(self) -> float:
        """The tasks' own times, summed (rounded to the millisecond): the summary's ``task_seconds``."""
        return round(sum(float(item.get("seconds") or 0.0) for item in self.tasks.values()), 3)

    def save(self) -> None:
        """Write the report whole (a reader never sees half a file); blocking, so run it off the loop."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, self.path)


def _describe(source: dict[str, Any]) -> str:
    return " ".join(f"{key}={value}" for key, value in source.items() if value is not None) or "(nothing)"
