"""Flags renamed so that one word means one thing still work for one release, with a warning:
``--trace`` is ``--rollout-trace`` (traces in the records), ``--trace-file`` is ``--span-trace``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def _steps_traced(out: Path) -> bool:
    (trajectory,) = (out / "trajectories").glob("*.json")
    return any(step.get("trace") for step in json.loads(trajectory.read_text())["steps"])


@pytest.mark.parametrize("old", [True, False])
def test_the_old_and_new_names_do_the_same(tmp_path: Path, old: bool) -> None:
    pytest.importorskip("opentelemetry.sdk")
    spans = tmp_path / "spans.json"
    flags = ["--trace", "off", "--trace-file", str(spans)] if old else [
        "--rollout-trace", "off", "--span-trace", str(spans)
    ]  # fmt: skip
    args = ["run", "humaneval", "--policy", "oracle", "--tasks", "0", "--out", str(tmp_path / "run"), *flags]
    done = subprocess.run(
        [sys.executable, "-m", "ares.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "ARES_IMAGE_FALLBACK": "offline"},
    )
    assert done.returncode == 0, done.stderr
    assert not _steps_traced(tmp_path / "run")  # the rollout trace level reached the records
    assert json.loads(spans.read_text())["traceEvents"]  # the span trace was written
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == (
        [
            "warning: --trace is now --rollout-trace; the old name goes in the next release",
            "warning: --trace-file is now --span-trace; the old name goes in the next release",
        ]
        if old
        else []
    )
