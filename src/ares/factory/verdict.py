"""Whether one suite run of a candidate bug makes a task, judged against the baseline's passing tests.

FAIL_TO_PASS is every test that passed at the baseline and is reported not passing now (failed,
errored, skipped): the SWE grader counts only PASSED/XFAIL as passing, so the unfixed repository can
never resolve the task. A test that is not reported at all is in neither list: its id is not stable
(a parametrize id made from the clock, say), so no later run could be graded on it.
PASS_TO_PASS are the baseline's passing tests that still pass.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from ares.tasks.swe.grading import TestStatus

#: pytest's exit codes for "interrupted" (collection errors), internal error, usage error, no tests.
BROKEN_EXIT_CODES = frozenset({2, 3, 4, 5})
PASSING = frozenset({TestStatus.PASSED, TestStatus.XFAIL})


class Reason(StrEnum):
    """Why a candidate was kept or dropped (the values are what results files and summaries say)."""

    KEPT = "kept"
    IMPORT_BROKEN = "import_broken"
    NO_FAILING_TEST = "no_failing_test"
    TOO_MANY_FAILING = "too_many_failing"
    FLAKY = "flaky"
    TIMEOUT = "timeout"
    TEST_ONLY = "test_only"
    DUPLICATE_DIFF = "duplicate_diff"


@dataclass(frozen=True, slots=True)
class Bounds:
    """At most ``max_failing`` FAIL_TO_PASS tests and, if set, at most ``max_fraction`` of the
    baseline's passing tests: a bug that fails most of the suite is a broken package, not a task."""

    max_failing: int = 50
    max_fraction: float | None = None

    def __post_init__(self) -> None:
        if self.max_failing < 1:
            raise ValueError(f"max_failing must be at least 1, not {self.max_failing}")
        if self.max_fraction is not None and not 0 < self.max_fraction <= 1:
            raise ValueError(f"max_fraction must be in (0, 1], not {self.max_fraction}")

    def limit(self, passed: int) -> int:
        if self.max_fraction is None:
            return self.max_failing
        return max(1, min(self.max_failing, math.floor(self.max_fraction * passed)))


def fail_to_pass(passed: frozenset[str], statuses: Mapping[str, TestStatus]) -> frozenset[str]:
    return frozenset(name for name in passed if name in statuses and statuses[name] not in PASSING)


def still_passing(passed: frozenset[str], statuses: Mapping[str, TestStatus]) -> frozenset[str]:
    return frozenset(name for name in passed if statuses.get(name) in PASSING)


def import_broken(passed: frozenset[str], statuses: Mapping[str, TestStatus], exit_code: int) -> bool:
    """The package (or a test module) no longer imports: collection errors, no test ran, or errors
    (not failures) for most of the tests that passed."""
    if exit_code in BROKEN_EXIT_CODES or not statuses:
        return True
    if any("::" not in name and status == TestStatus.ERROR for name, status in statuses.items()):
        return True  # an error reported for a whole file is a collection error
    if not passed & statuses.keys():
        return True
    errored = sum(statuses.get(name) == TestStatus.ERROR for name in passed)
    return errored * 2 > len(passed)


def judge(
    passed: frozenset[str], statuses: Mapping[str, TestStatus], exit_code: int, bounds: Bounds
) -> tuple[Reason, frozenset[str]]:
    """The verdict of one completed (not timed-out) run, and its FAIL_TO_PASS set."""
    if import_broken(passed, statuses, exit_code):
        return Reason.IMPORT_BROKEN, frozenset()
    failing = fail_to_pass(passed, statuses)
    if not failing:
        return Reason.NO_FAILING_TEST, failing
    if len(failing) > bounds.limit(len(passed)):
        return Reason.TOO_MANY_FAILING, failing
    return Reason.KEPT, failing
