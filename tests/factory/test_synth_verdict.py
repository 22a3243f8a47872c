"""The verdict of one run, on statuses parsed from real pytest output by the SWE harness's parser."""

from __future__ import annotations

import pytest
from synth_helpers import needs_swebench

from ares.factory.verdict import Bounds, Reason, judge, still_passing
from ares.tasks.swe.grading import parse_log

pytestmark = needs_swebench

BASE = "t.py::test_{}"
PASSED = frozenset(BASE.format(i) for i in range(10))


def log(**statuses: str) -> dict[str, object]:
    lines = [f"{statuses.get(f'test_{i}', 'PASSED')} {BASE.format(i)}" for i in range(10)]
    return parse_log("\n".join(lines) + "\n", "pytest")


def test_failures_within_the_bound_are_kept() -> None:
    reason, failing = judge(PASSED, log(test_3="FAILED", test_4="ERROR"), 1, Bounds())
    assert reason is Reason.KEPT and failing == {BASE.format(3), BASE.format(4)}


def test_a_skipped_test_counts_as_failing_and_a_vanished_one_in_neither_list() -> None:
    # A test no longer reported has an unstable id (from the clock, say): no later run could be
    # graded on it, so it is neither FAIL_TO_PASS nor PASS_TO_PASS.
    statuses = {k: v for k, v in log(test_1="SKIPPED").items() if k != BASE.format(2)}
    assert judge(PASSED, statuses, 1, Bounds())[1] == {BASE.format(1)}
    assert still_passing(PASSED, statuses) == PASSED - {BASE.format(1), BASE.format(2)}
    only_vanished = {k: v for k, v in log().items() if k != BASE.format(2)}
    assert judge(PASSED, only_vanished, 0, Bounds())[0] is Reason.NO_FAILING_TEST


def test_the_fraction_bound_applies_to_the_passing_tests() -> None:
    failing = log(test_0="FAILED", test_1="FAILED", test_2="FAILED")
    assert judge(PASSED, failing, 1, Bounds(max_fraction=0.3))[0] is Reason.KEPT
    assert judge(PASSED, failing, 1, Bounds(max_fraction=0.2))[0] is Reason.TOO_MANY_FAILING
    assert judge(PASSED, failing, 1, Bounds(max_failing=2))[0] is Reason.TOO_MANY_FAILING


@pytest.mark.parametrize(
    ("statuses", "exit_code"),
    [
        ({}, 5),  # no test collected
        (log(), 2),  # interrupted by a collection error
        ({"t.py": "ERROR"}, 1),  # an error for a whole file
        ({f"t.py::test_{i}": "ERROR" for i in range(6)}, 1),  # errors (not failures) for most tests
        ({"other.py::test_x": "PASSED"}, 0),  # none of the baseline's tests ran
    ],
)
def test_a_package_that_does_not_import_is_broken(statuses: dict[str, object], exit_code: int) -> None:
    assert judge(PASSED, statuses, exit_code, Bounds())[0] is Reason.IMPORT_BROKEN  # type: ignore[arg-type]


def test_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="max_failing"):
        Bounds(max_failing=0)
    with pytest.raises(ValueError, match="max_fraction"):
        Bounds(max_fraction=1.5)
