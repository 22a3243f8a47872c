"""Flat metrics from episode results and run summaries, the same for every tracker sink.

Pure functions, no I/O. Reward means and pass rates count scored episodes only (errored episodes
have no score), as in :class:`~ares.rollout.results.RunSummary`; status counts cover every terminal
status (zeros included), so the keys are the same from one run to the next and runs compare.
Percentiles interpolate linearly between the closest ranks (numpy's default), so p50 is the median.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ares.core.status import EpisodeStatus
from ares.rollout.results import EpisodeResult, RunSummary

#: Latency percentiles reported for steps and policy answers.
PERCENTILES = (50, 95, 99)
#: Statuses an episode can end with (counted in ``status/<name>``).
TERMINAL_STATUSES = tuple(str(s) for s in EpisodeStatus if s.is_terminal)


def percentile(values: Iterable[float], q: float) -> float | None:
    """The ``q``-th percentile (0..100) of ``values``, interpolated linearly; None when empty."""
    data = sorted(values)
    if not data:
        return None
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be within 0..100, got {q}")
    rank = (len(data) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(data) - 1)
    return data[low] + (data[high] - data[low]) * (rank - low)


def latency_metrics(results: Sequence[EpisodeResult], prefix: str = "latency/") -> dict[str, float]:
    """p50/p95/p99 of step and policy latencies over ``results`` (absent when none were measured)."""
    out: dict[str, float] = {}
    for kind, values in (
        ("step", [x for r in results for x in r.step_latencies_s]),
        ("policy", [x for r in results for x in r.policy_latencies_s]),
    ):
        for q in PERCENTILES:
            value = percentile(values, q)
            if value is not None:
                out[f"{prefix}{kind}_p{q}_s"] = value
    return out


def episode_metrics(result: EpisodeResult) -> dict[str, float]:
    """One episode's numbers: reward (scored episodes only), passed, errored, steps, time, usage."""
    out: dict[str, float] = {
        "passed": float(result.passed),
        "errored": float(result.errored),
        "steps": float(result.steps),
        "duration_s": float(result.duration_s),
    }
    if not result.errored:
        out["reward"] = float(result.reward or 0.0)
    _put_usage(out, result.prompt_tokens, result.completion_tokens, result.cost_usd)
    if result.step_latencies_s:
        out["step_latency_mean_s"] = statistics.fmean(result.step_latencies_s)
    if result.policy_latencies_s:
        out["policy_latency_mean_s"] = statistics.fmean(result.policy_latencies_s)
    return out


def run_metrics(summary: RunSummary, results: Sequence[EpisodeResult] = ()) -> dict[str, float]:
    """The run's flat metrics: ``run/*`` (reward, pass rate, counts, usage, time), ``status/*``
    counts, and, when the results are given, ``latency/*`` p50/p95/p99 for steps and policy answers
    (from the summary alone only the p50s are known)."""
    out: dict[str, float] = {
        "run/episodes": float(summary.episodes),
        "run/scored": float(summary.scored),
        "run/errored": float(summary.errored),
        "run/mean_reward": float(summary.mean_reward),
        "run/pass_rate": float(summary.pass_rate),
        "run/mean_steps": float(summary.mean_steps),
        "run/wall_time_s": float(summary.wall_time_s),
        "run/groups": float(len(summary.groups)),
    }
    usage: dict[str, float] = {}
    _put_usage(usage, summary.prompt_tokens, summary.completion_tokens, summary.cost_usd)
    out.update({f"run/{key}": value for key, value in usage.items()})
    for status in TERMINAL_STATUSES:
        out[f"status/{status}"] = float(summary.statuses.get(status, 0))
    if results:
        out.update(latency_metrics(results))
    else:
        if summary.p50_step_latency_s is not None:
            out["latency/step_p50_s"] = float(summary.p50_step_latency_s)
        if summary.p50_policy_latency_s is not None:
            out["latency/policy_p50_s"] = float(summary.p50_policy_latency_s)
    return out


def group_metrics(summary: RunSummary, results: Sequence[EpisodeResult] = ()) -> dict[int, dict[str, float]]:
    """Per group of rollouts: size, errored, scored, mean reward, pass rate, and (from the results)
    the reward spread (``reward_std``, 0 for a group whose rollouts all scored the same: no
    learning signal for GRPO-style training), status counts and usage."""
    members: dict[int, list[EpisodeResult]] = {}
    for result in results:
        if result.group is not None:
            members.setdefault(result.group, []).append(result)
    out: dict[int, dict[str, float]] = {}
    for stats in summary.groups:
        row: dict[str, float] = {
            "size": float(stats.size),
            "errored": float(stats.errored),
            "scored": float(stats.size - stats.errored),
        }
        if stats.mean_reward is not None:
            row["mean_reward"] = float(stats.mean_reward)
        if stats.pass_rate is not None:
            row["pass_rate"] = float(stats.pass_rate)
        rs = members.get(stats.group, [])
        if rs:
            rewards = [float(r.reward or 0.0) for r in rs if not r.errored]
            if rewards:
                row["reward_std"] = statistics.pstdev(rewards)
            for status in TERMINAL_STATUSES:
                row[f"status/{status}"] = float(sum(str(r.status) == status for r in rs))
            _put_usage(
                row,
                _total(r.prompt_tokens for r in rs),
                _total(r.completion_tokens for r in rs),
                _total(r.cost_usd for r in rs),
            )
        out[stats.group] = row
    return out


def group_task_ids(summary: RunSummary) -> dict[int, str]:
    """Which task each group ran."""
    return {g.group: g.task_id for g in summary.groups}


def flat_metrics(summary: RunSummary, results: Sequence[EpisodeResult] = ()) -> dict[str, float]:
    """:func:`run_metrics` plus every group's metrics as ``group/<g>/<name>``, in one flat dict."""
    out = run_metrics(summary, results)
    for group, row in group_metrics(summary, results).items():
        out.update({f"group/{group}/{key}": value for key, value in row.items()})
    return out


def _put_usage(out: dict[str, Any], prompt: int | None, completion: int | None, cost: float | None) -> None:
    """Tokens and cost where known (a policy that reports none leaves them out, not zero)."""
    if prompt is not None:
        out["prompt_tokens"] = float(prompt)
    if completion is not None:
        out["completion_tokens"] = float(completion)
    if prompt is not None or completion is not None:
        out["total_tokens"] = float((prompt or 0) + (completion or 0))
    if cost is not None:
        out["cost_usd"] = float(cost)


def _total(values: Iterable[Any]) -> Any:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def as_scalars(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The finite numeric entries of ``metrics`` (bools as 0/1), for sinks that take scalars only."""
    out: dict[str, float] = {}
    for key, value in metrics.items():
        if isinstance(value, bool | int | float) and math.isfinite(float(value)):
            out[key] = float(value)
    return out
