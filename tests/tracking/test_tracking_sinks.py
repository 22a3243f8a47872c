"""The sinks: JSONL content, TensorBoard event files read back by TensorBoard's own reader, W&B
offline run directories, and the fan-out that drops a failing sink."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from tracking_kit import grouped_results

from ares.rollout.results import RunSummary
from ares.tracking import (
    JsonlTracker,
    TensorBoardTracker,
    Trackers,
    TrackingError,
    make_tracker,
    parse_track_spec,
)
from ares.tracking.spec import TrackSpec


def feed(tracker: Any) -> RunSummary:
    results = grouped_results()
    for r in results:
        tracker.log_episode(r)
    tracker.log_metrics({"trainer/loss": 0.25, "note": "text is dropped"}, step=7)
    summary = RunSummary.of(results, 3.0)
    tracker.log_summary(summary, results)
    tracker.close()
    return summary


def test_jsonl_tracker_writes_one_record_per_line(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "metrics.jsonl"
    feed(JsonlTracker(path, config={"preset": "humaneval"}))
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["type"] for r in records] == ["run", *["episode"] * 6, "metrics", "summary"]
    assert records[0]["config"] == {"preset": "humaneval"}
    third = records[3]
    assert third["index"] == 2 and third["status"] == "errored" and "reward" not in third["metrics"]
    assert records[7] == {**records[7], "step": 7, "metrics": {"trainer/loss": 0.25}}
    summary = records[-1]
    assert summary["metrics"]["run/mean_reward"] == pytest.approx(0.8)
    assert summary["metrics"]["latency/step_p95_s"] == pytest.approx(9.55)
    assert [(g["group"], g["task_id"]) for g in summary["groups"]] == [(0, "a"), (1, "b")]
    assert summary["groups"][0]["metrics"]["mean_reward"] == 0.5
    feed(JsonlTracker(path))  # a second run (e.g. --resume) appends
    assert sum(json.loads(line)["type"] == "run" for line in path.read_text().splitlines()) == 2


def test_tensorboard_events_read_back_by_tensorboard(tmp_path: Path) -> None:
    pytest.importorskip("tensorboardX", reason="the tensorboard extra (tensorboardX) is not installed")
    accumulator = pytest.importorskip(
        "tensorboard.backend.event_processing.event_accumulator",
        reason="tensorboard (the reader) is not installed",
    )
    feed(TensorBoardTracker(tmp_path / "tb", config={"seed": 0}))
    assert list((tmp_path / "tb").glob("events.out.tfevents.*"))
    acc = accumulator.EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"run/mean_reward", "run/pass_rate", "status/errored", "latency/step_p99_s"} <= tags
    assert {"episode/reward", "group/mean_reward", "trainer/loss"} <= tags
    [mean] = acc.Scalars("run/mean_reward")
    assert mean.step == 0 and mean.value == pytest.approx(0.8)
    rewards = {e.step: e.value for e in acc.Scalars("episode/reward")}
    assert rewards == {0: 1.0, 1: 0.0, 3: 1.0, 4: 1.0, 5: 1.0}  # the errored episode 2 has none
    assert {e.step: e.value for e in acc.Scalars("group/mean_reward")} == {0: 0.5, 1: 1.0}
    [loss] = acc.Scalars("trainer/loss")
    assert loss.step == 7 and loss.value == 0.25


def test_wandb_offline_writes_a_run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("wandb", reason="the wandb extra is not installed")
    from ares.tracking import WandbTracker

    monkeypatch.setenv("WANDB_MODE", "online")  # forced offline whatever the environment says
    monkeypatch.setenv("WANDB_API_KEY", "")
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")  # nothing listens: a network call fails
    tracker = WandbTracker("ares-test", tmp_path, config={"preset": "humaneval"})
    tracker.close = lambda: None  # type: ignore[method-assign]  # feed's close: the summary is read first
    feed(tracker)
    assert tracker.run.settings.mode == "offline"
    assert tracker.run.summary["run/mean_reward"] == pytest.approx(0.8)
    assert tracker.run.summary["group/0/mean_reward"] == 0.5
    WandbTracker.close(tracker)
    runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 1, list((tmp_path / "wandb").iterdir())
    assert list(runs[0].glob("run-*.wandb"))
    [table] = runs[0].glob("files/media/table/groups_*.table.json")
    data = json.loads(table.read_text())
    assert data["columns"][:2] == ["group", "task_id"] and [row[:2] for row in data["data"]] == [
        [0, "a"],
        [1, "b"],
    ]


def test_missing_library_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "tensorboardX", None)  # import fails
    monkeypatch.setitem(sys.modules, "wandb", None)
    with pytest.raises(TrackingError, match=r"pip install 'ares\[tensorboard\]'"):
        make_tracker(f"tensorboard:{tmp_path}")
    with pytest.raises(TrackingError, match=r"pip install 'ares\[wandb\]'"):
        make_tracker("wandb:proj", default_dir=tmp_path)


@pytest.mark.parametrize(
    ("spec", "parsed"),
    [
        ("jsonl:out/m.jsonl", TrackSpec("jsonl", "out/m.jsonl")),
        ("tensorboard:runs/tb", TrackSpec("tensorboard", "runs/tb")),
        ("tb:runs/tb", TrackSpec("tensorboard", "runs/tb")),
        ("wandb:proj", TrackSpec("wandb", "proj")),
        ("wandb:proj@/tmp/w", TrackSpec("wandb", "proj", "/tmp/w")),
        ("jsonl:C:/x.jsonl", TrackSpec("jsonl", "C:/x.jsonl")),
    ],
)
def test_parse_track_spec(spec: str, parsed: TrackSpec) -> None:
    assert parse_track_spec(spec) == parsed


@pytest.mark.parametrize("spec", ["nope:x", "jsonl", "jsonl:", "wandb:", "wandb:p@", "wandb:a/b", "mlflow:x"])
def test_bad_track_specs(spec: str) -> None:
    with pytest.raises(TrackingError, match=r"--track"):
        parse_track_spec(spec)


class Broken:
    closed = False

    def log_episode(self, result: Any) -> None:
        raise OSError("disk full")

    def log_metrics(self, metrics: Any, step: Any = None) -> None: ...
    def log_summary(self, summary: Any, results: Any = ()) -> None: ...

    def close(self) -> None:
        self.closed = True


def test_a_failing_sink_is_reported_and_dropped(tmp_path: Path) -> None:
    errors: list[tuple[str, str]] = []
    broken = Broken()
    good = JsonlTracker(tmp_path / "m.jsonl")
    sinks = Trackers(
        [broken, good], names=["broken", "good"], on_error=lambda n, e: errors.append((n, str(e)))
    )
    feed(sinks)
    assert errors == [("broken", "disk full")] and broken.closed
    types = [json.loads(line)["type"] for line in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert types.count("episode") == 6 and types[-1] == "summary"
