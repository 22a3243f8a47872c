"""One run of a project's test suite in a sandbox, as per-test statuses.

Baseline and candidates run the very same command, so their statuses compare test by test; the
statuses come from the SWE harness's own pytest parser (``grading.parse_log``), so a kept candidate's
FAIL_TO_PASS names are exactly what the grader will look for.
"""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ares.factory.statements import failure_lines
from ares.sandbox.base import Sandbox
from ares.tasks.swe.grading import TestStatus, parse_log

#: No cache dir: a run must leave nothing that changes the next fork's run.
PYTEST = "python -m pytest -rA -p no:cacheprovider"
#: How much of the log's end a run keeps (enough for pytest's summary and a collection error).
TAIL_CHARS = 4000


@dataclass(frozen=True, slots=True)
class SuiteRun:
    """What one suite run reported: per-test statuses, pytest's exit code, whether it timed out."""

    statuses: Mapping[str, TestStatus]
    exit_code: int
    timed_out: bool
    seconds: float
    tail: str
    #: The assertion (``E``) lines of each failing test, paths and line numbers removed: the material
    #: of a kept bug's problem statement (``statements.failure_lines``).
    failures: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def suite_command(test_paths: Sequence[str]) -> str:
    return f"{PYTEST} {' '.join(shlex.quote(p) for p in test_paths)}"


async def run_suite(sandbox: Sandbox, test_paths: Sequence[str], *, cwd: str, timeout_s: float) -> SuiteRun:
    """Run the suite once; a timed-out run has had its whole process tree killed by the sandbox."""
    result = await sandbox.exec(suite_command(test_paths), cwd=cwd, timeout_s=timeout_s)
    log = result.stdout + result.stderr
    statuses = {} if result.timed_out else await asyncio.to_thread(parse_log, result.stdout, "pytest")
    failures = {} if result.timed_out else await asyncio.to_thread(failure_lines, result.stdout)
    return SuiteRun(
        statuses, result.exit_code, result.timed_out, result.duration_s, log[-TAIL_CHARS:],
        {name: tuple(lines) for name, lines in failures.items()},
    )  # fmt: skip
