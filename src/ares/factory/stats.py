"""``ares tasks stats``: what a set of SWE-format instances holds, for choosing a training mix.

Counts per project and per strategy (combinations as their own bucket), and the spread of the
difficulty signals the factory records (lines changed, FAIL_TO_PASS and PASS_TO_PASS sizes). Rows
without the factory's ``synth`` metadata (hand-made or official instances) are counted under
``other`` with what the row itself says (F2P/P2P sizes, lines of the gold patch).
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ares.tasks.swe.instance import SweInstance
from ares.tasks.swe.load import load_swe_instances

COMBO_PREFIX = "combo:"


@dataclass(frozen=True)
class Spread:
    """min / median / max of one signal."""

    low: float
    median: float
    high: float

    @classmethod
    def of(cls, values: Iterable[float]) -> Spread:
        data = sorted(values)
        if not data:
            return cls(0, 0, 0)
        return cls(data[0], statistics.median(data), data[-1])


@dataclass(frozen=True)
class SetStats:
    """The summary of one instance set."""

    instances: int
    by_project: Mapping[str, int]
    by_strategy: Mapping[str, int]
    combinations: int
    tests_visible: int
    lines_changed: Spread
    fail_to_pass: Spread
    pass_to_pass: Spread
    skipped: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        spread = lambda s: {"min": s.low, "median": s.median, "max": s.high}  # noqa: E731
        return {
            "instances": self.instances,
            "by_project": dict(self.by_project),
            "by_strategy": dict(self.by_strategy),
            "combinations": self.combinations,
            "tests_visible": self.tests_visible,
            "lines_changed": spread(self.lines_changed),
            "fail_to_pass": spread(self.fail_to_pass),
            "pass_to_pass": spread(self.pass_to_pass),
            "skipped_rows": list(self.skipped),
        }


def set_stats(path: str | Path) -> SetStats:
    """Summarize the instances at ``path`` (a file or a set's directory); bad rows are listed, not fatal."""
    dataset = load_swe_instances(path, skip_bad=True)
    rows = [_signals(instance) for instance in dataset]
    strategies = Counter(str(row["strategy"]) for row in rows)
    return SetStats(
        instances=len(rows),
        by_project=dict(sorted(Counter(str(row["project"]) for row in rows).items())),
        by_strategy=dict(sorted(strategies.items())),
        combinations=sum(n for name, n in strategies.items() if name.startswith(COMBO_PREFIX)),
        tests_visible=sum(1 for row in rows if row["tests_visible"]),
        lines_changed=Spread.of(row["lines_changed"] for row in rows),
        fail_to_pass=Spread.of(row["fail_to_pass"] for row in rows),
        pass_to_pass=Spread.of(row["pass_to_pass"] for row in rows),
        skipped=tuple(f"{s.where}: {s.reason}" for s in dataset.skipped),
    )


def _signals(instance: SweInstance) -> dict[str, Any]:
    synth = instance.metadata.get("synth")
    if isinstance(synth, Mapping):
        return {
            "project": synth.get("project") or instance.repo,
            "strategy": synth.get("strategy") or "other",
            "tests_visible": bool(synth.get("tests_visible")),
            "lines_changed": float(synth.get("lines_changed") or 0),
            "fail_to_pass": float(synth.get("fail_to_pass") or len(instance.fail_to_pass)),
            "pass_to_pass": float(synth.get("pass_to_pass") or len(instance.pass_to_pass)),
        }
    changed = [ln for ln in instance.patch.splitlines() if ln[:1] in "+-" and ln[:3] not in ("+++", "---")]
    return {
        "project": instance.repo,
        "strategy": "other",
        "tests_visible": False,
        "lines_changed": float(len(changed)),
        "fail_to_pass": float(len(instance.fail_to_pass)),
        "pass_to_pass": float(len(instance.pass_to_pass)),
    }
