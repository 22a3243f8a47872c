"""Print the yield of one or more ``ares tasks synth`` sets as Markdown tables (for docs/tasks.md).

Usage: python scripts/synth_yield.py SET_DIR [SET_DIR ...]
Reads each set's ``synth.json`` (written by the factory): per project, candidates tried, kept single
bugs, combinations tried/kept and instances; per strategy over all sets, tried, kept and the yield.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path


def _tried(by_strategy: dict[str, dict[str, int]]) -> tuple[Counter[str], Counter[str]]:
    tried: Counter[str] = Counter()
    kept: Counter[str] = Counter()
    for name, reasons in by_strategy.items():
        bucket = "combination" if name.startswith("combo:") else name
        tried[bucket] += sum(count for reason, count in reasons.items() if reason != "duplicate_diff")
        kept[bucket] += reasons.get("kept", 0)
    return tried, kept


def main(dirs: list[str]) -> None:
    tried_all: Counter[str] = Counter()
    kept_all: Counter[str] = Counter()
    reasons_all: Counter[str] = Counter()
    print("| project | version | candidates | kept single | combinations kept/tried | instances |")
    print("|---|---|---|---|---|---|")
    totals = Counter()
    for directory in dirs:
        report = json.loads((Path(directory) / "synth.json").read_text())
        singles, combos = report["singles"], report.get("combinations") or {}
        print(
            f"| {report['project']} | {report['version']} | {singles['trials']} | {singles['kept']} | "
            f"{combos.get('kept', 0)}/{combos.get('trials', 0)} | {report['instances']} |"
        )
        totals.update(
            candidates=singles["trials"], kept=singles["kept"], combos=combos.get("kept", 0),
            combos_tried=combos.get("trials", 0), instances=report["instances"],
        )  # fmt: skip
        for summary in (singles, combos):
            tried, kept = _tried(summary.get("by_strategy", {}))
            tried_all.update(tried)
            kept_all.update(kept)
            reasons_all.update(summary.get("by_reason", {}))
    print(
        f"| **all** | | {totals['candidates']} | {totals['kept']} | "
        f"{totals['combos']}/{totals['combos_tried']} | {totals['instances']} |"
    )
    print()
    print("| strategy | tried | kept | yield |")
    print("|---|---|---|---|")
    for name in sorted(tried_all, key=lambda n: (-kept_all[n] / max(1, tried_all[n]), n)):
        share = kept_all[name] / max(1, tried_all[name])
        print(f"| {name} | {tried_all[name]} | {kept_all[name]} | {share:.0%} |")
    print()
    print("| reason | trials |")
    print("|---|---|")
    for reason, count in reasons_all.most_common():
        print(f"| {reason} | {count} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
