"""Which tasks a run uses: one selection language for ``make``, ``load_tasks`` and ``reset``.

A selection is an index, a slice, ``"3"``, ``"0:10"``, ``"::2"``, a task id, or a list of these;
a shard ``i/n`` then keeps every n-th task from i. Every way of picking a task goes through here,
so a mistake reads the same wherever it is made.
"""

from __future__ import annotations

from collections.abc import Sequence

from ares.errors import TaskNotFoundError
from ares.tasks.model import Task

#: Which tasks to use: an index, a slice, "3", "0:10", "::2", a task id, or a list of these.
TaskSelection = int | slice | str | Sequence[int | str]


def select_tasks(
    tasks: Sequence[Task], selection: TaskSelection | None = None, shard: str | tuple[int, int] | None = None
) -> list[Task]:
    """Apply a selection, then keep shard ``i`` of ``n`` (every n-th task starting at i)."""
    chosen = list(tasks) if selection is None else _select(tasks, selection)
    if shard is not None:
        index, count = _parse_shard(shard)
        chosen = chosen[index::count]
    if not chosen:
        raise TaskNotFoundError(_nothing_chosen(len(tasks), selection, shard))
    return chosen


def _nothing_chosen(count: int, selection: TaskSelection | None, shard: str | tuple[int, int] | None) -> str:
    """Why no task is left, naming only what was given (a selection, a shard, or both)."""
    given = [f"the task selection {selection!r}"] if selection is not None else []
    if shard is not None:
        given.append(f"shard {shard!r}")
    if not given:
        return "the task source has no tasks"
    return f"{' with '.join(given)} matches none of the {count} tasks"


def _select(tasks: Sequence[Task], selection: TaskSelection) -> list[Task]:
    if isinstance(selection, slice):
        return list(tasks[selection])
    if isinstance(selection, int):
        return [by_index(tasks, selection)]
    if isinstance(selection, str):
        return _select_text(tasks, selection)
    out: list[Task] = []
    for item in selection:
        out.extend(_select(tasks, item))
    return out


def _select_text(tasks: Sequence[Task], text: str) -> list[Task]:
    if "," in text:
        return _select(tasks, [part.strip() for part in text.split(",") if part.strip()])
    by_id = {t.id: t for t in tasks}
    if text in by_id:
        return [by_id[text]]
    if ":" in text:
        try:
            parts = [int(p) if p.strip() else None for p in text.split(":")]
        except ValueError:
            raise TaskNotFoundError(f"bad task slice {text!r}; use START:STOP[:STEP]") from None
        return list(tasks[slice(*parts)])
    if text.lstrip("-").isdigit():
        return [by_index(tasks, int(text))]
    raise TaskNotFoundError(f"no task with id {text!r} (ids look like: {', '.join(list(by_id)[:4])})")


def by_index(tasks: Sequence[Task], index: int) -> Task:
    """``tasks[index]`` (negative counts from the end), or a TaskNotFoundError naming the range."""
    if not -len(tasks) <= index < len(tasks):
        raise TaskNotFoundError(f"task index {index} is out of range (0..{len(tasks) - 1})")
    return tasks[index]


def _parse_shard(shard: str | tuple[int, int]) -> tuple[int, int]:
    try:
        index, count = (int(x) for x in shard.split("/")) if isinstance(shard, str) else shard
    except ValueError:
        raise TaskNotFoundError(f"bad shard {shard!r}; use INDEX/COUNT, e.g. 0/4") from None
    if count < 1 or not 0 <= index < count:
        raise TaskNotFoundError(f"bad shard {shard!r}: need 0 <= INDEX < COUNT")
    return index, count
