"""A preset whose optional extra is missing fails before any episode: one ``error:`` line naming the
extra to install, exit 2, nothing run.

The package is made missing for real: the CLI runs in a fresh interpreter whose import system refuses
it (a meta-path finder inserted before ``ares`` is imported), exactly as if it were not installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ares.errors import MissingExtraError
from ares.extras import EXTRAS, Extra
from ares.presets import PRESETS

ROOT = Path(__file__).resolve().parents[2]
SWE = str(ROOT / "tests" / "fixtures" / "swe" / "instances.jsonl")

# Blocks the top-level packages named in argv[1] (comma-separated), then runs the CLI with the rest.
BLOCKING_CLI = """
import sys
blocked = set(sys.argv[1].split(","))

class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Blocker())
from ares.cli.main import app
app(args=sys.argv[2:], prog_name="ares")
"""


def run_blocked(blocked: str, *args: str, out: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run(
        [sys.executable, "-c", BLOCKING_CLI, blocked, "run", *args, "--policy", "oracle", "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("blocked", "args", "extra"),
    [
        ("minisweagent", ["humaneval-mswea", "--tasks", "0"], "mswea"),
        ("swebench", ["swebench", "--path", SWE, "--tasks", "0"], "swe"),
        ("unidiff", ["swebench-tools", "--path", SWE, "--tasks", "0"], "swe"),
        ("minisweagent,swebench", ["swebench-mswea", "--path", SWE, "--tasks", "0"], "swe,mswea"),
    ],
)
def test_missing_extra_is_one_line_before_any_episode(
    tmp_path: Path, blocked: str, args: list[str], extra: str
) -> None:
    out = tmp_path / "run"
    done = run_blocked(blocked, *args, out=out)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ") and f"pip install 'ares[{extra}]'" in lines[0]
    for module in blocked.split(","):
        assert module in lines[0]
    assert "running" not in done.stdout and not (out / "episodes").exists()


def test_every_preset_names_known_extras() -> None:
    for preset in PRESETS.values():
        assert set(preset.task_extras + preset.agent_extras) <= set(EXTRAS), preset.name
    assert "mswea" in PRESETS["harbor-mswea"].agent_extras
    assert "swe" in PRESETS["swebench-codex"].task_extras


def test_make_raises_a_typed_error_that_is_also_an_import_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """In Python, ``make`` raises MissingExtraError (an ImportError too) before loading anything."""
    from ares import presets as registry

    monkeypatch.setitem(EXTRAS, "swe", Extra("swe", "grading", ("ares_no_such_module",)))
    with pytest.raises(MissingExtraError, match=r"pip install 'ares\[swe\]'.*ares_no_such_module"):
        registry.make("swebench", path="/nonexistent")
    with pytest.raises(ImportError):
        registry.make("swebench", path="/nonexistent")
