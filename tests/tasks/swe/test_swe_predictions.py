"""Predictions files read as the harness reads them (JSONL, JSON list, SWE-agent's keyed JSON), with
errors naming the line and field; and predictions exported from recorded SWE episodes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ares.evaluation.swe import tasks_for
from ares.llm.types import LLMResponse
from ares.records.exports.swebench import swebench_predictions
from ares.records.model import EpisodeRecord, StepRecord
from ares.tasks.model import Task
from ares.tasks.swe.predictions import Prediction, PredictionsError, load_predictions, write_predictions

PATCH = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_harness_shapes_load_alike(tmp_path: Path) -> None:
    rows = [
        {"instance_id": "a__b-1", "model_name_or_path": "m", "model_patch": PATCH},
        {"instance_id": "a__b-2", "model_name_or_path": "m", "model_patch": None},
        {"instance_id": "a__b-3", "model_patch": ""},
    ]
    jsonl = _write(tmp_path, "p.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n\n")
    listed = _write(tmp_path, "p.json", json.dumps(rows))
    keyed = _write(tmp_path, "preds.json", json.dumps({r["instance_id"]: r for r in rows}))
    loaded = [load_predictions(p) for p in (jsonl, listed, keyed)]
    assert [[(p.instance_id, p.model_patch, p.empty) for p in one] for one in loaded] == [
        [("a__b-1", PATCH, False), ("a__b-2", None, True), ("a__b-3", "", True)]
    ] * 3
    assert loaded[0][1].where == f"{jsonl} line 2"
    out = tmp_path / "again.jsonl"
    assert write_predictions(loaded[0], out) == 3
    again = [Prediction(p.instance_id, p.model_patch, p.model_name_or_path, f"{out} line {i}")
             for i, p in enumerate(loaded[0], 1)]  # fmt: skip
    assert load_predictions(out) == again


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("p.jsonl", '{"instance_id": "a", "model_patch": ""}\n{oops\n', "p.jsonl line 2: invalid JSON"),
        ("p.jsonl", '{"model_patch": ""}\n', "field 'instance_id' must be a non-empty string (missing)"),
        ("p.jsonl", '{"instance_id": "a"}\n', "line 1: field 'model_patch' is missing"),
        ("p.jsonl", '{"instance_id": "a", "model_patch": 3}\n', "field 'model_patch' must be a string"),
        ("p.jsonl", '{"instance_id": "a", "model_patch": "x", "model_name_or_path": 1}\n', "path' must"),
        ("p.json", '[{"instance_id": "a", "model_patch": ""}, ["x"]]', "p.json row 2: a prediction must be"),
        ("p.json", '"text"', "expected a list of predictions or an object keyed by instance id"),
        ("p.jsonl", '{"instance_id": "a", "model_patch": ""}\n' * 2, "line 2: instance_id 'a' was already"),
        ("p.jsonl", "\n", "holds no predictions"),
        ("p.csv", "instance_id,model_patch\n", "unknown file type .csv"),
    ],
)  # fmt: skip
def test_bad_files_name_the_line_and_field(tmp_path: Path, name: str, text: str, message: str) -> None:
    with pytest.raises(PredictionsError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_predictions(_write(tmp_path, name, text))


def test_ids_not_in_the_instance_file_are_named() -> None:
    tasks = [Task(id="a__b-1", instruction="", tests={})]
    predictions = [Prediction("a__b-1", PATCH), Prediction("a__b-9", PATCH, where="p.jsonl line 2")]
    with pytest.raises(PredictionsError, match=r"1 predicted instance ids are not in the instance file: "
                       r"'a__b-9' \(p.jsonl line 2\); check --path"):  # fmt: skip
        tasks_for(predictions, tasks)


def _episode(
    episode_id: str, task_id: str, patch: str | None, *, env: str = "swebench", model: str | None = None
) -> EpisodeRecord:
    files = {} if patch is None else {"swe/model.patch": patch, "swe/grade.json": "{}"}
    step = StepRecord(1, "LAST", None, LLMResponse(content="x", model=model), 1.0, 0.0, 1.0, 2.0)
    return EpisodeRecord(
        episode_id, task_id, 0, {"class": "CodeEnvironment", "name": env}, 1.0, 2.0, "finished", 1.0,
        steps=(step,), metadata={"episode": {"verifier_files": files}},
    )  # fmt: skip


def test_export_keeps_one_patch_per_instance_and_says_what_it_skipped() -> None:
    episodes = [
        _episode("e1", "a__b-1", PATCH, model="qwen/coder"),
        _episode("e2", "a__b-1", ""),  # a second rollout of the same instance
        _episode("e3", "a__b-2", ""),  # the agent changed nothing: an empty prediction
        _episode("e4", "a__b-3", None),  # errored before the verifier ran
        _episode("e5", "HumanEval/0", None, env="humaneval"),
        _episode("e6", "a__b-4", "x\n[... 9 characters cut ...]\ny"),
    ]
    export = swebench_predictions(episodes, default_model="oracle")
    assert [p.to_json() for p in export.predictions] == [
        {"instance_id": "a__b-1", "model_name_or_path": "qwen/coder", "model_patch": PATCH},
        {"instance_id": "a__b-2", "model_name_or_path": "oracle", "model_patch": ""},
    ]
    assert [note.removeprefix("1 episodes skipped: ") for note in export.notes()] == [
        "SWE episode without a recorded patch (status finished: the verifier did not run)",
        "another episode of the same instance was exported (one prediction per instance)",
        "not a SWE episode (no swe/model.patch recorded)",
        "patch cut at the record's size bound (it would not apply)",
    ]
    named = swebench_predictions(episodes, model_name="mine")
    assert {p.model_name_or_path for p in named.predictions} == {"mine"}


def _ares(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ares.cli.main", *args], capture_output=True, text=True, timeout=120
    )


def test_export_of_episodes_without_swe_patches_is_a_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "trajectories").mkdir()
    record = _episode("e5", "HumanEval/0", None, env="humaneval")
    (tmp_path / "trajectories" / "e5.json").write_text(json.dumps(record.to_json()))
    done = _ares("export", str(tmp_path), "--format", "swebench")
    assert done.returncode == 2 and "no SWE episode under" in done.stderr, done.stderr
    assert "not a SWE episode" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "predictions.jsonl").exists()
    other = _ares("export", str(tmp_path), "--format", "sft", "--model-name", "m")
    assert other.returncode == 2 and "--model-name applies to --format swebench only" in other.stderr
