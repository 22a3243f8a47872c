"""The metrics every tracker writes, computed on synthetic results."""

from __future__ import annotations

import math

import pytest
from tracking_kit import grouped_results, result

from ares.core.status import EpisodeStatus
from ares.rollout.results import RunSummary
from ares.tracking import episode_metrics, flat_metrics, group_metrics, percentile, run_metrics


def test_percentile_interpolates_like_numpy_linear() -> None:
    data = [float(x) for x in range(1, 11)]  # 1..10
    assert percentile(data, 50) == 5.5
    assert percentile(data, 95) == pytest.approx(9.55)
    assert percentile(data, 99) == pytest.approx(9.91)
    assert percentile(data, 0) == 1.0 and percentile(data, 100) == 10.0
    assert percentile([3.0], 99) == 3.0
    assert percentile([], 50) is None
    with pytest.raises(ValueError):
        percentile(data, 101)


def test_run_metrics_exclude_errored_from_reward_means() -> None:
    results = grouped_results()
    summary = RunSummary.of(results, wall_time_s=12.0)
    m = run_metrics(summary, results)
    assert m["run/episodes"] == 6 and m["run/errored"] == 1 and m["run/scored"] == 5
    # scored rewards 1, 0, 1, 1, 1; passed needs FINISHED, so the truncated one does not pass
    assert m["run/mean_reward"] == pytest.approx(0.8)
    assert m["run/pass_rate"] == pytest.approx(3 / 5)
    assert m["status/finished"] == 4 and m["status/errored"] == 1 and m["status/truncated"] == 1
    assert m["status/cancelled"] == 0 and "status/running" not in m  # every terminal status, zeros too
    assert m["run/prompt_tokens"] == 30 and m["run/completion_tokens"] == 10 and m["run/total_tokens"] == 40
    assert m["run/cost_usd"] == pytest.approx(0.01)
    assert m["run/wall_time_s"] == 12.0 and m["run/groups"] == 2
    steps = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]
    assert m["latency/step_p50_s"] == percentile(steps, 50) == summary.p50_step_latency_s
    assert m["latency/step_p95_s"] == pytest.approx(9.55)
    assert m["latency/step_p99_s"] == pytest.approx(9.91)
    assert m["latency/policy_p50_s"] == m["latency/policy_p99_s"] == 0.5
    assert all(isinstance(v, float) and math.isfinite(v) for v in m.values())


def test_run_metrics_from_a_summary_alone_know_only_the_p50s() -> None:
    results = grouped_results()
    m = run_metrics(RunSummary.of(results, 1.0))
    assert m["latency/step_p50_s"] == 5.5 and "latency/step_p95_s" not in m


def test_usage_is_absent_when_no_policy_reported_it() -> None:
    results = [result(0), result(1)]
    m = run_metrics(RunSummary.of(results, 1.0), results)
    assert not any("tokens" in k or "cost" in k for k in m)
    assert not any(k.startswith("latency/") for k in m)


def test_group_metrics() -> None:
    results = grouped_results()
    groups = group_metrics(RunSummary.of(results, 1.0), results)
    assert set(groups) == {0, 1}
    g0, g1 = groups[0], groups[1]
    assert g0["size"] == 3 and g0["errored"] == 1 and g0["scored"] == 2
    assert g0["mean_reward"] == 0.5 and g0["pass_rate"] == 0.5 and g0["reward_std"] == 0.5
    assert g0["status/errored"] == 1 and g0["prompt_tokens"] == 30 and g0["cost_usd"] == 0.01
    assert g1["mean_reward"] == 1.0 and g1["pass_rate"] == pytest.approx(2 / 3) and g1["reward_std"] == 0.0
    assert "prompt_tokens" not in g1


def test_a_group_of_only_errored_rollouts_has_no_reward() -> None:
    err = {"type": "X", "message": "y"}
    results = [result(i, group=0, status=EpisodeStatus.ERRORED, error=err) for i in range(2)]
    summary = RunSummary.of(results, 1.0)
    g0 = group_metrics(summary, results)[0]
    assert g0["errored"] == 2 and "mean_reward" not in g0 and "reward_std" not in g0
    assert run_metrics(summary, results)["run/mean_reward"] == 0.0


def test_flat_metrics_name_groups() -> None:
    results = grouped_results()
    flat = flat_metrics(RunSummary.of(results, 1.0), results)
    assert flat["group/0/mean_reward"] == 0.5 and flat["group/1/size"] == 3 and "run/pass_rate" in flat


def test_episode_metrics() -> None:
    results = grouped_results()
    m0 = episode_metrics(results[0])
    assert m0["reward"] == 1.0 and m0["passed"] == 1.0 and m0["errored"] == 0.0
    assert (
        m0["total_tokens"] == 15 and m0["step_latency_mean_s"] == 1.5 and m0["policy_latency_mean_s"] == 0.5
    )
    errored = episode_metrics(results[2])
    assert "reward" not in errored and errored["errored"] == 1.0 and errored["passed"] == 0.0
