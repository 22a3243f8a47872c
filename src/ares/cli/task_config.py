"""Unknown names in task files (``TaskConfigWarning``, often a typo such as ``[agnet]``) as the CLI
reports them: one ``warning:`` line per problem when the tasks are first loaded, or with ``--strict``
one ``error:`` line and exit 2 before anything runs. Later loads of the same tasks (each worker
builds its own environment) say nothing more: a problem is reported once per task, not per episode.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager

from ares.cli.common import fail, warn
from ares.errors import TaskConfigWarning


@contextmanager
def reported_task_config(strict: bool) -> Iterator[None]:
    """Load tasks inside: their task-file problems are printed after (or, ``strict``, refused)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TaskConfigWarning)
        yield
    problems: list[str] = []
    for item in caught:
        if issubclass(item.category, TaskConfigWarning):
            problems.append(str(item.message))
        else:  # not ours to report: back to the usual warning machinery
            warnings.warn_explicit(item.message, item.category, item.filename, item.lineno)
    problems = list(dict.fromkeys(problems))
    if strict and problems:
        more = f"; and {len(problems) - 1} more" if len(problems) > 1 else ""
        raise fail(f"{problems[0]}{more} (--strict refuses unknown task.toml names; fix or remove them)")
    for problem in problems:
        warn(problem)


@contextmanager
def quiet_task_config() -> Iterator[None]:
    """Inside: task-file problems, already reported, are not reported again."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TaskConfigWarning)
        yield
