"""Audit time per task: ``ares tasks audit`` on a few tasks of each kind, printing JSON.

Runs the CLI (real sandboxes, the whole exploit battery, ``--mutants``) on HumanEval problems, the
Harbor fixtures, the deliberately weak set and toolz SWE fixtures, and prints per source the wall
time, the summed episode seconds, the seconds per task and the verdict counts.

    python bench/audit.py [--humaneval 0:4] [--swe pytoolz__toolz-90001,...] [--mutants 5] [-c 4]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).parents[1]
FIXTURES = ROOT / "tests" / "fixtures"


def _audit(args: list[str], mutants: int, concurrency: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="ares-bench-audit-") as out:
        command = [sys.executable, "-m", "ares.cli.main", "tasks", "audit", *args]
        command += ["--mutants", str(mutants), "-c", str(concurrency), "--out", out]
        env = {**os.environ, "ARES_IMAGE_FALLBACK": os.environ.get("ARES_IMAGE_FALLBACK", "offline")}
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, env=env)
        wall = time.perf_counter() - started
        report = json.loads((Path(out) / "audit.json").read_text())
    summary = report["summary"]
    tasks = max(1, summary["tasks"])
    return {
        "exit_code": done.returncode, "wall_s": round(wall, 1), "wall_s_per_task": round(wall / tasks, 1),
        "episode_s_per_task": round(summary["task_seconds"] / tasks, 1),
        "counts": {k: v for k, v in summary.items() if k != "task_seconds"},
        "per_task_s": {t["task_id"]: t["seconds"] for t in report["tasks"]},
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--humaneval", default="0:4")
    parser.add_argument("--swe", default="pytoolz__toolz-90001,pytoolz__toolz-90002")
    parser.add_argument("--mutants", type=int, default=5)
    parser.add_argument("-c", "--concurrency", type=int, default=4)
    opts = parser.parse_args()
    sources = {
        "humaneval": ["humaneval", "--tasks", opts.humaneval],
        "harbor": [str(FIXTURES / "harbor")],
        "weak": [str(FIXTURES / "audit_weak")],
        "swe": [str(FIXTURES / "swe" / "instances.jsonl"), "--tasks", opts.swe],
    }
    print(
        json.dumps(
            {name: _audit(args, opts.mutants, opts.concurrency) for name, args in sources.items()}, indent=2
        )
    )


if __name__ == "__main__":
    main()
