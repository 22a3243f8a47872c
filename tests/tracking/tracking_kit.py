"""Synthetic episode results for the tracking tests."""

from __future__ import annotations

from typing import Any

from ares.core.status import EpisodeStatus
from ares.rollout.results import EpisodeResult


def result(index: int, **kw: Any) -> EpisodeResult:
    status = kw.pop("status", EpisodeStatus.FINISHED)
    base: dict[str, Any] = {
        "index": index, "task_id": kw.pop("task_id", f"t{index}"), "status": status,
        "reward": kw.pop("reward", None if status is EpisodeStatus.ERRORED else 1.0), "steps": 2,
        "duration_s": 1.0, "step_latencies_s": (), **kw,
    }  # fmt: skip
    return EpisodeResult(**base)


def grouped_results() -> list[EpisodeResult]:
    """Two groups of three: group 0 has rewards 1, 0 and an errored rollout; group 1 all 1."""
    err = {"type": "PolicyError", "message": "boom"}
    return [
        result(0, task_id="a", group=0, reward=1.0, step_latencies_s=(1.0, 2.0), prompt_tokens=10,
               completion_tokens=5, cost_usd=0.01, policy_latencies_s=(0.5,)),
        result(1, task_id="a", group=0, reward=0.0, step_latencies_s=(3.0,), prompt_tokens=20,
               completion_tokens=5),
        result(2, task_id="a", group=0, status=EpisodeStatus.ERRORED, error=err, step_latencies_s=(4.0,)),
        result(3, task_id="b", group=1, reward=1.0, step_latencies_s=(5.0,)),
        result(4, task_id="b", group=1, reward=1.0, status=EpisodeStatus.TRUNCATED),
        result(5, task_id="b", group=1, reward=1.0, step_latencies_s=(6.0, 7.0, 8.0, 9.0, 10.0)),
    ]  # fmt: skip
