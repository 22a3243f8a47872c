"""The verdict rules of task validation: which finding wins and what the reason says."""

from __future__ import annotations

import pytest

from ares.validation import RunOutcome, judge


def _run(reward: float | None, status: str = "finished", policy: str = "oracle", **kw: object) -> RunOutcome:
    return RunOutcome(policy, status, reward, 0.5, **kw)  # type: ignore[arg-type]


NULL = _run(0.0, policy="null")


def test_good() -> None:
    verdict = judge("t", [_run(1.0), _run(1.0)], NULL)
    assert (verdict.verdict, verdict.reason, verdict.seconds) == ("good", "oracle 1 x2, null 0", 1.5)


@pytest.mark.parametrize(
    ("oracle", "null", "reason"),
    [
        ([_run(0.0)], NULL, "oracle scores 0 (expected 1)"),
        (
            [_run(0.7)],
            _run(0.3, policy="null"),
            "oracle scores 0.7 (expected 1); null scores 0.3 (expected 0)",
        ),
        (
            [_run(None, "truncated", exit_reason="step_limit")],
            NULL,
            "oracle run ended truncated (step_limit) with reward none (expected 1)",
        ),
    ],
)
def test_broken(oracle: list[RunOutcome], null: RunOutcome, reason: str) -> None:
    verdict = judge("t", oracle, null)
    assert (verdict.verdict, verdict.reason) == ("broken", reason)


def test_disagreeing_repeats_are_flaky_even_when_another_check_fails() -> None:
    low = _run(0.0, verifier_tail="AssertionError: 3 != 4")
    verdict = judge("t", [_run(1.0), low, _run(1.0)], _run(1.0, policy="null"))
    assert verdict.verdict == "flaky" and verdict.reason == "oracle rewards differ across 3 runs: 1, 0, 1"
    assert verdict.evidence == "AssertionError: 3 != 4"  # the run that scored low says why


def test_an_errored_run_leaves_the_task_unjudged() -> None:
    error = {"type": "VerifierError", "message": "no reward file"}
    verdict = judge("t", [_run(1.0), _run(0.0)], _run(None, "errored", policy="null", error=error))
    assert verdict.verdict == "errored"
    assert verdict.reason == "null run errored: VerifierError: no reward file"
    assert verdict.to_dict()["errors"] == [{"run": "null run", **error}]
