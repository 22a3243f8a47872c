"""What one task's validation runs say about the task: good, broken, flaky or errored, and why.

A good task gives its reference solution (the oracle) reward 1 every time and an untouched workspace
(the null policy) reward 0. Repeated oracle runs that disagree make the task flaky (its verdict does
not depend on the agent alone); an oracle that scores below 1 or a null run that scores above 0 make
it broken; a run that errored (image build, sandbox or verifier failure) leaves the task unjudged:
errored. The worst finding wins, in the order errored, flaky, broken.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ares.rollout.results import EpisodeResult

Verdict = Literal["good", "broken", "flaky", "errored"]
VERDICTS: tuple[Verdict, ...] = ("good", "broken", "flaky", "errored")
Policy = Literal["oracle", "null"]
#: Characters of the verifier's output kept as evidence for a run that scored what it should not.
EVIDENCE_CHARS = 600
_MESSAGE_CHARS = 300


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """One validation run of a task, reduced to what the verdict and the report need."""

    policy: Policy
    status: str
    reward: float | None
    seconds: float
    exit_reason: str | None = None
    error: Mapping[str, str] | None = None
    #: The tail of the verifier's output (stderr, then stdout): why it scored what it did.
    verifier_tail: str = ""

    @classmethod
    def of(cls, policy: Policy, result: EpisodeResult) -> RunOutcome:
        record = result.record.get("episode", result.record)
        error = None
        if result.error:
            message = str(result.error.get("message") or "").strip()
            first = message.splitlines()[0] if message else "(no message)"
            error = {"type": str(result.error.get("type") or "error"), "message": first[:_MESSAGE_CHARS]}
        output = "\n".join(
            part.strip() for part in (record.get("verifier_stderr"), record.get("verifier_stdout")) if part
        )
        return cls(
            policy=policy, status=str(result.status), reward=result.reward, seconds=result.duration_s,
            exit_reason=result.exit_reason, error=error, verifier_tail=output[-EVIDENCE_CHARS:],
        )  # fmt: skip

    @property
    def errored(self) -> bool:
        return self.status == "errored"

    def describe_error(self) -> str:
        error = self.error or {}
        return f"{error.get('type', 'error')}: {error.get('message', '(no message)')}"


@dataclass(frozen=True, slots=True)
class TaskValidation:
    """One task's verdict, the reason, and the runs it rests on (``oracle``: the repeats, in order)."""

    task_id: str
    verdict: Verdict
    reason: str
    oracle: tuple[RunOutcome, ...]
    null: RunOutcome
    evidence: str = ""

    @property
    def seconds(self) -> float:
        """The task's validation time: all its runs, one after the other."""
        return sum(run.seconds for run in (*self.oracle, self.null))

    @property
    def bad(self) -> bool:
        return self.verdict != "good"

    def to_dict(self) -> dict[str, Any]:
        runs = (*self.oracle, self.null)
        errors = [
            {"run": name, **(run.error or {"type": "error", "message": "(no message)"})}
            for name, run in zip(_run_names(len(self.oracle)), runs, strict=True)
            if run.errored
        ]
        return {
            "task_id": self.task_id,
            "verdict": self.verdict,
            "reason": self.reason,
            "oracle_rewards": [run.reward for run in self.oracle],
            "null_reward": self.null.reward,
            "statuses": {"oracle": [run.status for run in self.oracle], "null": self.null.status},
            "errors": errors,
            "seconds": round(self.seconds, 3),
            "run_seconds": {
                "oracle": [round(run.seconds, 3) for run in self.oracle],
                "null": round(self.null.seconds, 3),
            },
            "evidence": self.evidence,
        }


def judge(task_id: str, oracle: Sequence[RunOutcome], null: RunOutcome) -> TaskValidation:
    """The verdict on ``task_id`` from its oracle repeats and its null run."""
    if not oracle:
        raise ValueError("a validation needs at least one oracle run")
    runs = (*oracle, null)
    for name, run in zip(_run_names(len(oracle)), runs, strict=True):
        if run.errored:
            reason = f"{name} errored: {run.describe_error()}"
            return TaskValidation(task_id, "errored", reason, tuple(oracle), null)
    rewards = [run.reward for run in oracle]
    if len(set(rewards)) > 1:
        shown = ", ".join(_reward(r) for r in rewards)
        first_low = next(run for run in oracle if run.reward != max(rewards, key=_key))
        reason = f"oracle rewards differ across {len(oracle)} runs: {shown}"
        return TaskValidation(task_id, "flaky", reason, tuple(oracle), null, first_low.verifier_tail)
    problems: list[str] = []
    evidence = ""
    if not _scores_one(oracle[0]):
        problems.append(_unexpected("oracle", oracle[0], "1"))
        evidence = oracle[0].verifier_tail
    if not _scores_zero(null):
        problems.append(_unexpected("null", null, "0"))
        evidence = evidence or null.verifier_tail
    if problems:
        return TaskValidation(task_id, "broken", "; ".join(problems), tuple(oracle), null, evidence)
    repeats = f" x{len(oracle)}" if len(oracle) > 1 else ""
    return TaskValidation(task_id, "good", f"oracle 1{repeats}, null 0", tuple(oracle), null)


def _run_names(repeats: int) -> list[str]:
    return [f"oracle run {i + 1}" for i in range(repeats)] + ["null run"]


def _scores_one(run: RunOutcome) -> bool:
    return run.status == "finished" and run.reward is not None and math.isclose(run.reward, 1.0)


def _scores_zero(run: RunOutcome) -> bool:
    return run.status == "finished" and run.reward is not None and math.isclose(run.reward, 0.0, abs_tol=1e-9)


def _unexpected(policy: Policy, run: RunOutcome, expected: str) -> str:
    if run.status != "finished":
        why = f" ({run.exit_reason})" if run.exit_reason else ""
        return f"{policy} run ended {run.status}{why} with reward {_reward(run.reward)} (expected {expected})"
    return f"{policy} scores {_reward(run.reward)} (expected {expected})"


def _reward(reward: float | None) -> str:
    return "none" if reward is None else f"{reward:g}"


def _key(reward: float | None) -> float:
    return -math.inf if reward is None else reward
