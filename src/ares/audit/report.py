"""The audit report: one JSON file (``audit.json``), rewritten as each task is judged.

Per task: its verdict, label, the attacks that hacked it, every attack's reward, reason and seconds,
and its test strength; per set: counts of each verdict and of weak tasks, and per attack on how many
tasks it ran, hacked and errored. ``ares tasks validate`` shows the verdicts of an audit report that
sits next to the set it validates; ``ares tasks synth --audit`` drops what a report condemns.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ares.audit.verdict import VERDICTS, AttackCounts, TaskAudit
from ares.errors import AresError
from ares.validation.task_report import TaskReport

REPORT_NAME = "audit.json"
FORMAT = "ares-task-audit/1"
#: The settings that decide a verdict: a report is resumed only with the same ones.
JUDGING = ("attacks", "mutants", "radius", "weak_below", "sandbox")


class AuditReportError(AresError):
    """An audit report that cannot be read (unreadable, another format)."""


@dataclass
class AuditReport(TaskReport):
    """The audits so far, by task id, and what they were run on."""

    @classmethod
    def resume(cls, path: Path, source: dict[str, Any], settings: dict[str, Any]) -> AuditReport:
        """The report at ``path`` to continue (a new one if there is none): about the same ``source``,
        judged the same way (attacks, mutants, radius, weak threshold, backend; the concurrency may
        differ), else verdicts of different audits would be mixed in one report."""
        report = cls.read(path, FORMAT, source, settings, AuditReportError)
        if report.tasks and path.exists():
            earlier = json.loads(path.read_text(encoding="utf-8")).get("settings") or {}
            differ = sorted(k for k in JUDGING if earlier.get(k) != settings.get(k))
            if differ:
                raise AuditReportError(
                    f"cannot resume {path}: it was audited with other {', '.join(differ)}; "
                    "give the same options or choose another --out"
                )
        return report

    def record(self, audit: TaskAudit) -> None:
        self.tasks.pop(audit.task_id, None)  # an errored task audited again: its new verdict, last
        self.tasks[audit.task_id] = audit.to_dict()

    def counts(self) -> dict[str, int]:
        found = Counter(item["verdict"] for item in self.tasks.values())
        weak = sum(bool(item.get("weak")) for item in self.tasks.values())
        return {"tasks": len(self.tasks), **{v: found[v] for v in VERDICTS}, "weak": weak}

    def hackable(self) -> list[dict[str, Any]]:
        return [item for item in self.tasks.values() if item["verdict"] == "hackable"]

    def to_dict(self) -> dict[str, Any]:
        attacks = AttackCounts.of(list(self.tasks.values()))
        per_attack = {
            name: {"ran": ran, "hacked": attacks.hacked.get(name, 0), "errored": attacks.errored.get(name, 0)}
            for name, ran in attacks.ran.items()
        }
        return {
            "format": FORMAT, "source": self.source, "settings": self.settings,
            "summary": {**self.counts(), "task_seconds": self.task_seconds()}, "attacks": per_attack,
            "wall_time_s": round(self.wall_time_s, 3), "tasks": list(self.tasks.values()),
        }  # fmt: skip


def load_audits(path: Path) -> dict[str, dict[str, Any]]:
    """The task audits of the report at ``path``, by task id."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") != FORMAT:
            raise AuditReportError(f"{path} is not an ares task audit report (format {FORMAT})")
        return {str(item["task_id"]): dict(item) for item in data["tasks"]}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise AuditReportError(f"cannot read {path}: {type(exc).__name__}: {exc}") from None


def report_next_to(source: Path | None) -> Path | None:
    """The ``audit.json`` beside a set (in its directory, or beside its instance file), if there is one."""
    if source is None:
        return None
    folder = source if source.is_dir() else source.parent
    candidate = folder / REPORT_NAME
    return candidate if candidate.is_file() else None


def condemned(audits: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The tasks an audit condemns (hackable or weak), with the label that says why."""
    return {
        task_id: str(item.get("label") or item["verdict"])
        for task_id, item in audits.items()
        if item["verdict"] == "hackable" or item.get("weak")
    }
