"""GRPO step time, synchronous against ``--async`` (sampling step t+1 while step t computes its
gradients), in one sitting: ``examples/train_grpo.py`` run both ways on the same tasks, seeds and
sizes, each in a fresh interpreter. Prints JSON: each mode's per-step wall times (the first step
left out: it has nothing to overlap with), their medians and the ratio sync / async.

    .venv/bin/python bench/grpo_async.py [--steps 4] [--tasks 0:2] [--k 2] [--max-new-tokens 48]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "train_grpo.py"


def run(mode: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    out = work / f"{mode}.jsonl"
    command = [
        sys.executable, str(EXAMPLE), "--steps", str(args.steps), "--tasks", args.tasks, "--k", str(args.k),
        "--max-new-tokens", str(args.max_new_tokens), "--train-layers", str(args.train_layers),
        "--skip-local-check", "--out", str(out), *(["--async"] if mode == "async" else []),
    ]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True, text=True, cwd=work)
    steps = [json.loads(line) for line in out.read_text().splitlines()][1:]
    walls = [s["wall_s"] for s in steps[1:]]
    return {
        "wall_s": walls,
        "median_step_s": statistics.median(walls),
        "mean_reward": [s["mean_reward"] for s in steps],
        "policy_versions": [s["policy_versions"] for s in steps],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--tasks", default="0:2")
    parser.add_argument("--k", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--train-layers", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ares-grpo-bench-") as tmp:
        figures = {mode: run(mode, args, Path(tmp)) for mode in ("sync", "async")}
    figures["sync_over_async"] = figures["sync"]["median_step_s"] / figures["async"]["median_step_s"]
    figures["settings"] = vars(args)
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
