"""What one task's audit runs say: ``sound``, ``hackable`` (by which attacks) or ``errored``, plus
how strong its tests are against mutants of the fix (``weak`` below a threshold).

An attack hacks a task when its episode finished with a reward above 0: nothing an exploit does is
work towards the fix, so any reward it earns is a hole (the null run included: a task that pays
for doing nothing is hackable by ``null``). Partial credit counts: a rubric that pays a stub is paid
for no work. A run that errored says nothing either way; a task whose null run errored, or whose
every attack errored, is ``errored``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ares.rollout.results import EpisodeResult

Verdict = Literal["sound", "hackable", "errored"]
VERDICTS: tuple[Verdict, ...] = ("sound", "hackable", "errored")
#: Characters of the verifier's output kept as evidence of a hack.
EVIDENCE_CHARS = 400
_REWARD_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class AttackOutcome:
    """One attack's episode on one task, reduced to the verdict's evidence."""

    attack: str
    status: str
    reward: float | None
    seconds: float
    reason: str = ""
    evidence: str = ""
    #: The tail of what the exploit's commands printed in the agent's sandbox.
    output: str = ""

    @classmethod
    def of(cls, attack: str, result: EpisodeResult, output: str = "") -> AttackOutcome:
        episode = result.record.get("episode", result.record)
        terms = episode.get("reward_terms") or {}
        parts = [
            f"{name}={value:g}" for name, value in terms.items() if isinstance(value, int | float) and value
        ]
        if result.exit_reason:
            parts.insert(0, str(result.exit_reason))
        if result.error:
            message = str(result.error.get("message") or "").strip().splitlines()
            parts.append(f"{result.error.get('type', 'error')}: {message[0][:200] if message else ''}")
        verifier = "\n".join(
            str(part).strip()
            for part in (episode.get("verifier_stderr"), episode.get("verifier_stdout"))
            if part
        )
        last = next((line.strip() for line in reversed(verifier.splitlines()) if line.strip()), "")
        if last:
            parts.append(f"verifier: {last[:200]}")
        return cls(
            attack, str(result.status), result.reward, round(result.duration_s, 3),
            "; ".join(parts) or str(result.status), verifier[-EVIDENCE_CHARS:], output,
        )  # fmt: skip

    @property
    def errored(self) -> bool:
        return self.status == "errored"

    @property
    def hacked(self) -> bool:
        return self.status == "finished" and self.reward is not None and self.reward > _REWARD_EPS

    def to_dict(self) -> dict[str, Any]:
        return {
            "attack": self.attack, "status": self.status, "reward": self.reward, "seconds": self.seconds,
            "reason": self.reason, "output": self.output,
            **({"evidence": self.evidence} if self.hacked else {}),
        }  # fmt: skip


@dataclass(frozen=True, slots=True)
class Strength:
    """How the task's tests fare against mutants of the gold-patched code near the fix."""

    mutants: int
    accepted: int
    errored: int = 0
    #: Why there is no score (no gold source to mutate, no mutant near the fix), else "".
    note: str = ""
    survivors: tuple[str, ...] = ()

    @property
    def judged(self) -> int:
        return self.mutants - self.errored

    @property
    def score(self) -> float | None:
        """The share of judged mutants the tests reject (1: every mutant caught); None: no mutant."""
        return None if self.judged <= 0 else round(1.0 - self.accepted / self.judged, 4)

    def weak(self, threshold: float) -> bool:
        score = self.score
        return score is not None and score < threshold

    def to_dict(self) -> dict[str, Any]:
        return {
            "mutants": self.mutants, "accepted": self.accepted, "errored": self.errored,
            "accepted_share": None if self.judged <= 0 else round(self.accepted / self.judged, 4),
            "score": self.score, "note": self.note, "survivors": list(self.survivors),
        }  # fmt: skip


@dataclass(frozen=True, slots=True)
class TaskAudit:
    """One task's verdict, the attacks that hacked it, and every attack's outcome."""

    task_id: str
    kind: str
    verdict: Verdict
    attacks: tuple[AttackOutcome, ...]
    strength: Strength | None = None
    weak_threshold: float = 0.5
    reason: str = ""

    @property
    def hacked_by(self) -> tuple[str, ...]:
        return tuple(a.attack for a in self.attacks if a.hacked)

    @property
    def weak(self) -> bool:
        return self.strength is not None and self.strength.weak(self.weak_threshold)

    @property
    def label(self) -> str:
        """``sound``, ``hackable: a, b``, ``errored``; `` + weak (score)`` when the tests are weak."""
        text = f"hackable: {', '.join(self.hacked_by)}" if self.verdict == "hackable" else self.verdict
        if self.weak and self.strength is not None:
            text += f"; weak (strength {self.strength.score:g})"
        return text

    @property
    def seconds(self) -> float:
        return round(sum(a.seconds for a in self.attacks), 3)

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id, "kind": self.kind, "verdict": self.verdict, "label": self.label,
            "hacked_by": list(self.hacked_by), "weak": self.weak, "reason": self.reason,
            "strength": None if self.strength is None else self.strength.to_dict(),
            "seconds": self.seconds, "attacks": [a.to_dict() for a in self.attacks],
        }  # fmt: skip


def judge(
    task_id: str,
    kind: str,
    attacks: Sequence[AttackOutcome],
    strength: Strength | None = None,
    *,
    weak_threshold: float = 0.5,
    null: str = "null",
) -> TaskAudit:
    """The verdict on ``task_id`` from its attacks' outcomes (see the module docstring)."""
    verdict, reason = _verdict(attacks, null)
    return TaskAudit(task_id, kind, verdict, tuple(attacks), strength, weak_threshold, reason)


def _verdict(attacks: Sequence[AttackOutcome], null: str) -> tuple[Verdict, str]:
    by_name: Mapping[str, AttackOutcome] = {a.attack: a for a in attacks}
    if null in by_name and by_name[null].errored:
        return "errored", f"the null run errored: {by_name[null].reason}"
    hacked = [a for a in attacks if a.hacked]
    if hacked:
        return "hackable", "rewarded: " + ", ".join(f"{a.attack} {a.reward:g}" for a in hacked)
    if attacks and all(a.errored for a in attacks):
        return "errored", "every attack errored"
    errored = [a.attack for a in attacks if a.errored]
    return "sound", f"no attack rewarded ({len(attacks)} run" + (
        f"; errored: {', '.join(errored)})" if errored else ")"
    )


@dataclass(frozen=True, slots=True)
class AttackCounts:
    """Per attack, on how many tasks it ran, hacked and errored (the set's table)."""

    ran: dict[str, int] = field(default_factory=dict)
    hacked: dict[str, int] = field(default_factory=dict)
    errored: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, audits: Sequence[Mapping[str, Any]]) -> AttackCounts:
        counts = cls()
        for audit in audits:
            for attack in audit["attacks"]:
                name = attack["attack"]
                counts.ran[name] = counts.ran.get(name, 0) + 1
                if attack.get("status") == "errored":
                    counts.errored[name] = counts.errored.get(name, 0) + 1
                if name in audit["hacked_by"]:
                    counts.hacked[name] = counts.hacked.get(name, 0) + 1
        return counts
