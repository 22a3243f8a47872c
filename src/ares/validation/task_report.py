"""The report file of a check run task by task (``validation.json``, and the audit's ``audit.json``).

One JSON document of per-task results, by task id, next to what they were run on; rewritten whole
as each task is judged, so an interrupted run keeps every task it finished.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


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
