"""The line the bash agent adds to an observation when a resource limit hit the command."""

from __future__ import annotations

import pytest

from ares.agents.bash import limit_note
from ares.sandbox.base import ExecResult, Resources


def result(limit_hit: str | None) -> ExecResult:
    return ExecResult("", "", 1, False, 0.1, limit_hit=limit_hit)


@pytest.mark.parametrize(
    ("limit_hit", "note"),
    [
        (None, None),
        ("memory", "[the command was stopped: memory limit of 256 MB reached]"),
        ("pids", "[a fork failed: process limit of 64 processes reached]"),
        ("disk", "[a write failed: disk limit of 1024 MB reached]"),
        ("cpu_time", "[the command was stopped: cpu_time limit reached]"),
        ("output", "[the middle of the output was dropped: output limit reached]"),
    ],
)
def test_note_names_the_limit_and_its_size(limit_hit: str | None, note: str | None) -> None:
    resources = Resources(memory_mb=256, pids=64, storage_mb=1024)
    assert limit_note(result(limit_hit), resources) == note


def test_note_without_a_known_size() -> None:
    assert limit_note(result("memory"), Resources()) == "[the command was stopped: memory limit reached]"
