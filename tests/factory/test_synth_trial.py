"""Candidates tried in forks of the real toolz baseline: each verdict from a real pytest run."""

from __future__ import annotations

import asyncio
import re

import pytest
from synth_helpers import ITERTOOLZ, NO_LEAKS, FakeCandidate, needs_swebench, sandbox_leaks

from ares.factory.baseline import Baseline
from ares.factory.trial import try_candidate
from ares.factory.verdict import Bounds, Reason

pytestmark = needs_swebench

FIRST = "    return next(iter(seq))\n"
#: ``first`` returns the second element: test_first fails, and so do the tests of what calls it
#: (``join`` picks its key function with ``first``; test_interpose reads ``first(rest(...))``).
SECOND_NOT_FIRST = "    seq = iter(seq)\n    next(seq)\n    return next(seq)\n"
BROKEN_FIRST = {
    f"toolz/tests/test_itertoolz.py::{name}"
    for name in (
        "test_first",
        "test_interpose",
        "test_join",
        "test_join_double_repeats",
        "test_join_missing_element",
    )
}
#: Every public function of the module fails at random, on its own coin per call: the F2P sets of
#: two runs agree with a chance far below one in a million.
COIN_FLIPS = """

import random as _random


def _flaky(function):
    def wrapper(*args, **kwargs):
        if _random.random() < 0.5:
            raise RuntimeError("coin")
        return function(*args, **kwargs)
    return wrapper


for _name in __all__:
    if callable(globals()[_name]) and not isinstance(globals()[_name], type):
        globals()[_name] = _flaky(globals()[_name])
"""


def edit(source: str, old: str, new: str) -> str:
    assert source.count(old) == 1, old
    return source.replace(old, new)


async def test_a_bug_in_first_is_kept_with_its_failing_tests(
    toolz_baseline: Baseline, itertoolz_source: str
) -> None:
    candidate = FakeCandidate(ITERTOOLZ, edit(itertoolz_source, FIRST, SECOND_NOT_FIRST))
    trial = await try_candidate(toolz_baseline, candidate, timeout_s=120)
    assert trial.reason is Reason.KEPT and trial.runs == 2, trial
    assert set(trial.fail_to_pass) == BROKEN_FIRST
    assert set(trial.pass_to_pass) == toolz_baseline.passed - BROKEN_FIRST
    assert trial.key == candidate.key and trial.strategy == "hand"
    failures = trial.extra["failures"]  # the statement's material: assertion lines, no paths
    assert set(failures) <= {t.split("::")[-1] for t in BROKEN_FIRST} and failures.get("test_first")
    assert not any(".py" in line for lines in failures.values() for line in lines)
    assert sandbox_leaks() == NO_LEAKS


async def test_the_bound_drops_a_bug_failing_too_many_tests(
    toolz_baseline: Baseline, itertoolz_source: str
) -> None:
    candidate = FakeCandidate(ITERTOOLZ, edit(itertoolz_source, FIRST, SECOND_NOT_FIRST))
    trial = await try_candidate(toolz_baseline, candidate, timeout_s=120, bounds=Bounds(max_failing=1))
    assert trial.reason is Reason.TOO_MANY_FAILING and trial.runs == 1
    assert set(trial.fail_to_pass) == BROKEN_FIRST


async def test_a_package_that_no_longer_imports_is_import_broken(
    toolz_baseline: Baseline, itertoolz_source: str
) -> None:
    candidate = FakeCandidate(ITERTOOLZ, "import toolz_has_no_such_module\n" + itertoolz_source)
    trial = await try_candidate(toolz_baseline, candidate, timeout_s=120)
    assert trial.reason is Reason.IMPORT_BROKEN and trial.runs == 1 and trial.fail_to_pass == ()
    assert re.search(r"error", trial.detail, re.I), trial.detail


async def test_an_equivalent_change_fails_no_test(toolz_baseline: Baseline, itertoolz_source: str) -> None:
    same = edit(itertoolz_source, FIRST, "    it = iter(seq)\n    return next(it)\n")
    candidate = FakeCandidate(ITERTOOLZ, same)
    trial = await try_candidate(toolz_baseline, candidate, timeout_s=120)
    assert trial.reason is Reason.NO_FAILING_TEST and trial.fail_to_pass == ()


async def test_an_infinite_loop_times_out_and_leaves_nothing_running(
    toolz_baseline: Baseline, itertoolz_source: str
) -> None:
    candidate = FakeCandidate(ITERTOOLZ, edit(itertoolz_source, FIRST, "    while True:\n        pass\n"))
    trial = await try_candidate(toolz_baseline, candidate, timeout_s=10)
    assert trial.reason is Reason.TIMEOUT and trial.runs == 1 and "10s" in trial.detail
    assert sandbox_leaks() == NO_LEAKS


async def test_runs_that_disagree_are_flaky_with_the_differing_tests(
    toolz_baseline: Baseline, itertoolz_source: str
) -> None:
    candidate = FakeCandidate(ITERTOOLZ, itertoolz_source + COIN_FLIPS)
    trial = await try_candidate(toolz_baseline, candidate, timeout_s=120, bounds=Bounds(max_failing=1000))
    assert trial.reason is Reason.FLAKY and trial.runs == 2, trial
    assert trial.flaky_tests and set(trial.flaky_tests) <= toolz_baseline.passed
    assert sandbox_leaks() == NO_LEAKS


async def test_a_change_to_a_test_file_is_not_run(toolz_baseline: Baseline) -> None:
    trial = await try_candidate(toolz_baseline, FakeCandidate("toolz/tests/test_itertoolz.py", "x = 1\n"))
    assert trial.reason is Reason.TEST_ONLY and trial.runs == 0


async def test_a_path_outside_the_repository_is_refused(toolz_baseline: Baseline) -> None:
    with pytest.raises(ValueError, match="relative to the repository root"):
        await try_candidate(toolz_baseline, FakeCandidate("../etc/passwd", "x\n"))


async def test_cancelling_a_trial_stops_its_fork(toolz_baseline: Baseline, itertoolz_source: str) -> None:
    candidate = FakeCandidate(ITERTOOLZ, edit(itertoolz_source, FIRST, "    while True:\n        pass\n"))
    task = asyncio.ensure_future(try_candidate(toolz_baseline, candidate, timeout_s=300))
    for _ in range(600):  # until the fork's suite runs (the loop never ends by itself)
        await asyncio.sleep(0.1)
        if sandbox_leaks()["procs"]:
            break
    assert sandbox_leaks()["dirs"] and sandbox_leaks()["procs"], "the fork's suite never started"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sandbox_leaks() == NO_LEAKS
