"""What every refilled run of two groups of two HumanEval episodes must show, locally and on Ray."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ares.records.loader import load_episodes
from ares.rollout.results import EpisodeResult, RunSummary


def check_whole_refilled_groups(results: Sequence[EpisodeResult], records: Path) -> None:
    """Groups stay whole and in order, every episode passed unmasked after two refills in all, and
    the failed attempts' trajectories are superseded, not duplicated."""
    assert [(r.index, r.group, r.task_id) for r in results] == [
        (0, 0, "humaneval_0"), (1, 0, "humaneval_0"), (2, 1, "humaneval_1"), (3, 1, "humaneval_1"),
    ]  # fmt: skip
    assert all(r.reward == 1.0 and r.blame is None and not r.masked for r in results)
    summary = RunSummary.of(results, 1.0)
    assert (summary.refills, summary.masked, summary.errored) == (2, 0, 0)
    kept = load_episodes(records)
    assert sorted(e.metadata["episode_index"] for e in kept) == [0, 1, 2, 3]
