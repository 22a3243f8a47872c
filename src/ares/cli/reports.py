"""The report a task-by-task check writes in its ``--out`` (``validation.json``, ``audit.json``): new,
or with ``--resume`` the one there; an existing report is never silently overwritten."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from ares.cli.common import fail
from ares.errors import AresError
from ares.validation.task_report import TaskReport

R = TypeVar("R", bound=TaskReport)


def report_at(
    kind: type[R], path: Path, source: dict[str, Any], settings: dict[str, Any], *, resume: bool
) -> R:
    """A new ``kind`` report at ``path``, or with ``resume`` the one there (refused, with why, when it
    cannot be continued); a report there without ``resume`` is refused."""
    if not resume:
        if path.exists():
            raise fail(f"{path} exists: add --resume to continue it, or choose another --out")
        return kind(path, source, settings)
    try:
        return kind.resume(path, source, settings)
    except AresError as exc:
        raise fail(str(exc)) from None
