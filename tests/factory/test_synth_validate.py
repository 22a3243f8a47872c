"""Many candidates against the real toolz baseline: parallel forks, duplicates, resume, the summary."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from synth_helpers import ITERTOOLZ, NO_LEAKS, TEST_PATHS, FakeCandidate, needs_swebench, sandbox_leaks

from ares.factory.baseline import Baseline, BaselineError, take_baseline
from ares.factory.validate import read_results, validate_all

pytestmark = needs_swebench


FIRST_BODY = "    return next(iter(seq))\n"
SECOND_BODY = "    seq = iter(seq)\n    next(seq)\n    return next(seq)\n"


def candidates(source: str) -> list[FakeCandidate]:
    """Two bugs (``flip`` strategy), one equivalent change and one broken import (``hand``)."""
    second = source.replace(
        "    return next(iter(seq))\n", "    seq = iter(seq)\n    next(seq)\n    return next(seq)\n"
    )
    # ``second`` returns the first element instead.
    first = source.replace(
        "    seq = iter(seq)\n    next(seq)\n    return next(seq)\n", "    return next(iter(seq))\n", 1
    )
    same = source.replace("    return next(iter(seq))\n", "    it = iter(seq)\n    return next(it)\n")
    assert len({source, second, first, same}) == 4
    return [
        FakeCandidate(ITERTOOLZ, second, "flip"),
        FakeCandidate(ITERTOOLZ, first, "flip"),
        FakeCandidate(ITERTOOLZ, same, "hand"),
        FakeCandidate(ITERTOOLZ, "import toolz_has_no_such_module\n" + source, "hand"),
    ]


async def test_two_workers_validate_drop_duplicates_and_resume(
    toolz_baseline: Baseline, itertoolz_source: str, tmp_path: Path
) -> None:
    results = tmp_path / "out" / "trials.jsonl"
    batch = candidates(itertoolz_source)
    summary = await validate_all(
        toolz_baseline, [*batch, batch[0]], workers=2, results=results, timeout_s=120
    )
    assert summary.ran == 4 and summary.resumed == 0 and summary.trials == 5 and summary.kept == 2
    assert summary.by_reason == {"duplicate_diff": 1, "import_broken": 1, "kept": 2, "no_failing_test": 1}
    assert summary.by_strategy == {
        "flip": {"duplicate_diff": 1, "kept": 2},
        "hand": {"import_broken": 1, "no_failing_test": 1},
    }
    assert summary.yield_by_strategy == {"flip": round(2 / 3, 4), "hand": 0.0}
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    assert sorted(line["key"] for line in lines) == sorted(c.key for c in batch)  # no duplicate line
    done = read_results(results)
    assert "toolz/tests/test_itertoolz.py::test_second" in done[batch[1].key].fail_to_pass
    assert "toolz/tests/test_itertoolz.py::test_first" in done[batch[0].key].fail_to_pass
    assert sandbox_leaks() == NO_LEAKS

    extra = FakeCandidate(ITERTOOLZ, itertoolz_source + "\n\nUNUSED = 1\n", "hand")
    again = await validate_all(toolz_baseline, [*batch, extra], workers=2, results=results, timeout_s=120)
    assert again.ran == 1 and again.resumed == 4 and again.trials == 5
    assert again.by_reason == {"import_broken": 1, "kept": 2, "no_failing_test": 2}
    assert len(results.read_text().splitlines()) == 5

    smaller = await validate_all(toolz_baseline, batch[:2], workers=2, results=results, timeout_s=120)
    assert smaller.ran == 0 and smaller.resumed == 2  # a smaller pool: only its own trials count
    assert smaller.trials == 2 and smaller.by_reason == {"kept": 2}


async def test_a_torn_results_line_is_a_clear_error(toolz_baseline: Baseline, tmp_path: Path) -> None:
    results = tmp_path / "trials.jsonl"
    results.write_text('{"key": "abc", "path": "x.py", "reason": "kept"}\n{"key": \n')
    with pytest.raises(ValueError, match=r"trials.jsonl:2: not a trial line"):
        await validate_all(toolz_baseline, [], results=results)


async def test_a_baseline_where_nothing_passes_is_refused(toolz_image: str) -> None:
    with pytest.raises(BaselineError, match=r"no test passed at the baseline \(pytest exit 4"):
        await take_baseline(toolz_image, ("toolz/tests/no_such_test.py",), timeout_s=120)
    assert sandbox_leaks() == NO_LEAKS


async def test_the_baseline_knows_what_passed(toolz_baseline: Baseline) -> None:
    assert toolz_baseline.test_paths == TEST_PATHS and toolz_baseline.snapshot.backend == "local"
    assert "toolz/tests/test_itertoolz.py::test_first" in toolz_baseline.passed
    # The instance's real bug in ``tail``: failing at the baseline, so never a FAIL_TO_PASS test.
    assert toolz_baseline.statuses["toolz/tests/test_itertoolz.py::test_tail"] == "FAILED"
    assert "toolz/tests/test_itertoolz.py::test_tail" not in toolz_baseline.passed


async def test_cancelling_validation_stops_every_fork_and_records_nothing_unfinished(
    toolz_baseline: Baseline, itertoolz_source: str, tmp_path: Path
) -> None:
    loops = [
        FakeCandidate(ITERTOOLZ, itertoolz_source.replace(body, "    while True:\n        pass\n", 1))
        for body in (FIRST_BODY, SECOND_BODY)
    ]
    results = tmp_path / "trials.jsonl"
    task = asyncio.ensure_future(
        validate_all(toolz_baseline, loops, workers=2, results=results, timeout_s=300)
    )
    for _ in range(600):  # until both forks run their suites
        await asyncio.sleep(0.1)
        if len(sandbox_leaks()["dirs"]) == 2 and sandbox_leaks()["procs"]:
            break
    assert len(sandbox_leaks()["dirs"]) == 2, "both forks should be running"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sandbox_leaks() == NO_LEAKS
    assert not results.exists() or results.read_text() == ""  # a restart tries them again
