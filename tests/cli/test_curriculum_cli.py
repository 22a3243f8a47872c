"""Curricula from the command line, as a user runs them (real subprocesses, HumanEval on the local
sandbox): a validation measures a policy's pass rates, a run samples by them and keeps its store and
plan beside its results, a resumed run replays its plan, and ``tasks stats`` shows the rates."""

from __future__ import annotations

import json
from pathlib import Path

from test_cli import ares


def _validate_null(out: Path) -> dict:  # type: ignore[type-arg]
    done = ares("tasks", "validate", "humaneval", "--tasks", "0:3", "--repeats", "2", "--policy", "null",
                "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "null: 0 of 6 runs passed (0.0%) over 3 tasks" in done.stdout
    return json.loads((out / "validation.json").read_text())


def test_validate_measures_a_policy_and_a_run_samples_by_it(tmp_path: Path) -> None:
    report = _validate_null(tmp_path / "validate")
    assert report["settings"]["policy"] == "null"
    assert [(t["policy_outcomes"], t["policy_pass_rate"]) for t in report["tasks"]] == [
        ([False, False], 0.0)
    ] * 3
    out = tmp_path / "run"
    done = ares(
        "run", "humaneval", "--tasks", "0:4", "-n", "8", "--group-size", "2",
        "--sampler", "skip-solved:tau=0.5,n=2",
        "--pass-rates", str(tmp_path / "validate" / "validation.json"), "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    plan = json.loads((out / "curriculum_plan.json").read_text())
    assert len(plan) == 4 and set(plan) <= {f"humaneval_{i}" for i in range(4)}
    store = json.loads((out / "pass_rates.json").read_text())
    counts = store["tasks"]
    # the null policy's zeros were seeded (tasks 0-2: 2 samples each); the oracle's 8 runs added
    assert sum(task["counts"]["unversioned"][1] for task in counts.values()) == 6 + 8
    stats = ares("tasks", "stats", "--pass-rates", str(out), "--json")
    assert stats.returncode == 0, stats.stderr
    rows = {row["task_id"]: row for row in json.loads(stats.stdout)["tasks"]}
    assert sum(row["samples"] for row in rows.values()) == 14


def test_a_resumed_run_replays_its_plan_and_counts_nothing_twice(tmp_path: Path) -> None:
    out = tmp_path / "run"
    first = ares("run", "humaneval", "--tasks", "0:6", "-n", "8", "--group-size", "2", "--sampler", "uniform",
                 "--out", str(out))  # fmt: skip
    assert first.returncode == 0, first.stderr
    plan = json.loads((out / "curriculum_plan.json").read_text())
    for name in sorted(p.name for p in (out / "episodes").glob("*.json"))[4:]:  # the last two groups lost
        (out / "episodes" / name).unlink()
    store = json.loads((out / "pass_rates.json").read_text())
    again = ares("run", "humaneval", "--tasks", "0:6", "-n", "8", "--group-size", "2", "--sampler", "uniform",
                 "--out", str(out), "--resume")  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert json.loads((out / "curriculum_plan.json").read_text()) == plan
    episodes = [json.loads(p.read_text()) for p in sorted((out / "episodes").glob("*.json"))]
    assert [e["task_id"] for e in episodes] == [task for task in plan for _ in range(2)]
    resumed = json.loads((out / "pass_rates.json").read_text())
    total = sum(task["counts"]["unversioned"][1] for task in resumed["tasks"].values())
    assert total == sum(task["counts"]["unversioned"][1] for task in store["tasks"].values()) + 4


def test_bad_curriculum_flags_are_one_line_errors(tmp_path: Path) -> None:
    done = ares(
        "run", "humaneval", "--tasks", "0:2", "--sampler", "hardest-first", "--out", str(tmp_path / "a")
    )
    assert done.returncode == 2 and "hardest-first" in done.stderr and "informative" in done.stderr
    missing = ares("run", "humaneval", "--tasks", "0:2", "--pass-rates", str(tmp_path / "nope"),
                   "--out", str(tmp_path / "b"))  # fmt: skip
    assert missing.returncode == 2 and "no such file or directory" in missing.stderr
    neither = ares("tasks", "stats")
    assert neither.returncode == 2 and "--pass-rates" in neither.stderr


def test_validate_bounds_the_measured_policy_and_refuses_sampling_flags_it_cannot_use(tmp_path: Path) -> None:
    out = tmp_path / "local"
    done = ares("tasks", "validate", "humaneval", "--tasks", "0:1", "--repeats", "1", "--policy", "local",
                "--max-tokens", "16", "--temperature", "0.5", "--step-limit", "2",
                "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    (task,) = json.loads((out / "validation.json").read_text())["tasks"]
    assert task["verdict"] == "good" and len(task["policy_outcomes"]) == 1
    assert task["policy_outcomes"][0] in (True, False)  # 16 tokens in at most 2 steps: measured, not masked
    one = ("tasks", "validate", "humaneval", "--tasks", "0:1")
    alone = ares(*one, "--max-tokens", "16", "--out", str(tmp_path / "a"))
    assert alone.returncode == 2 and "give --policy SPEC" in alone.stderr
    null = ares(*one, "--policy", "null", "--temperature", "0.5", "--out", str(tmp_path / "n"))
    assert null.returncode == 2 and "--temperature applies to --policy openai only" in null.stderr


def test_a_resumed_measurement_keeps_the_tasks_measured_under_that_policy(tmp_path: Path) -> None:
    out = tmp_path / "validate"
    report = _validate_null(out)
    report["tasks"][1].pop("policy_outcomes")  # as if the measurement had stopped before its last task
    report["tasks"][2]["policy"] = "oracle"  # measured under another policy: measured again
    (out / "validation.json").write_text(json.dumps(report))
    again = ares("tasks", "validate", "humaneval", "--tasks", "0:3", "--repeats", "2", "--policy", "null",
                 "--out", str(out), "--resume")  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert "3 of 3 tasks already judged" in again.stdout
    assert "1 of 3 tasks already measured under null" in again.stdout
    assert "null: 0 of 6 runs passed (0.0%) over 3 tasks" in again.stdout
    tasks = json.loads((out / "validation.json").read_text())["tasks"]
    assert [(t["policy"], t["policy_outcomes"]) for t in tasks] == [("null", [False, False])] * 3
