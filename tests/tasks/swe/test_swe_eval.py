"""``ares eval`` on the real fixtures (local sandbox): gold patches resolve, empty patches are not run,
a patch that does not apply and one that applies without fixing are unresolved; the reports equal what
the official ``swebench`` harness computes from the same logs; ``ares run`` -> ``ares export --format
swebench`` -> ``ares eval`` round-trips.

One ``ares eval`` run serves the module (each graded instance is a sandbox and a test run).
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ares.tasks.swe.harness import load_harness, swebench_available
from ares.tasks.swe.patches import reverse_patch

FIXTURES = Path(__file__).parents[2] / "fixtures" / "swe"
INSTANCES = FIXTURES / "instances.jsonl"
GOLD = ["pytoolz__toolz-90001", "python-poetry__tomlkit-90004", "mahmoud__boltons-90001"]
EMPTY = {"pytoolz__toolz-90002": "", "mahmoud__boltons-90002": None}
NOT_APPLYING = "python-poetry__tomlkit-90001"
NOT_FIXING = "pytoolz__toolz-90003"  # gets toolz-90001's bug added instead of its own fixed

pytestmark = pytest.mark.skipif(not swebench_available(), reason="needs swebench + unidiff (ares[swe])")


def _rows() -> dict[str, dict[str, Any]]:
    return {row["instance_id"]: row for row in map(json.loads, INSTANCES.read_text().splitlines())}


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ARES_IMAGE_FALLBACK": os.environ.get("ARES_IMAGE_FALLBACK", "offline")}
    command = [sys.executable, "-m", "ares.cli.main", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd, timeout=600)


def _predictions() -> list[dict[str, Any]]:
    rows = _rows()
    gold = [(iid, rows[iid]["patch"]) for iid in GOLD]
    lines = rows[NOT_APPLYING]["patch"].splitlines(keepends=True)
    broken = "".join(ln[:-1] + " # gone\n" if ln.startswith("-") and not ln.startswith("---") else ln
                     for ln in lines)  # it removes lines the file does not have: no fuzz helps  # fmt: skip
    unfixed = reverse_patch(rows["pytoolz__toolz-90001"]["patch"])
    chosen = [*gold, *EMPTY.items(), (NOT_APPLYING, broken), (NOT_FIXING, unfixed)]
    return [{"instance_id": i, "model_name_or_path": "test/model", "model_patch": p} for i, p in chosen]


@pytest.fixture(scope="module")
def evaluated(project_images: None, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """One ``ares eval`` over all the cases (7 predictions, 5 of them run): its dir and process."""
    where = tmp_path_factory.mktemp("eval")
    (where / "preds.json").write_text(json.dumps(_predictions()))  # the JSON list shape
    done = _cli("eval", str(where / "preds.json"), "--path", str(INSTANCES), "--out", str(where / "out"))
    return where / "out", done


def _report(out: Path, instance_id: str) -> dict[str, Any]:
    return json.loads((out / instance_id / "report.json").read_text())[instance_id]


def test_gold_resolves_empty_is_not_run_and_bad_patches_are_unresolved(evaluated: tuple[Path, Any]) -> None:
    out, done = evaluated
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["resolved_ids"] == sorted(GOLD)
    assert report["empty_patch_ids"] == sorted(EMPTY)
    assert report["unresolved_ids"] == sorted([NOT_APPLYING, NOT_FIXING])
    assert report["error_ids"] == [] and report["completed_instances"] == 5
    counts = (report["total_instances"], report["submitted_instances"], len(report["incomplete_ids"]))
    assert counts == (25, 7, 18)
    assert not any((out / iid).exists() for iid in EMPTY)  # not run, as in the harness
    failed = _report(out, NOT_APPLYING)
    assert not failed["patch_successfully_applied"] and not failed["resolved"]
    assert "tests_status" not in failed
    assert ">>>>> Patch Apply Failed" in (out / NOT_APPLYING / "apply.log").read_text()
    assert not (out / NOT_APPLYING / "test_output.txt").exists()  # no test run for it
    unfixed = _report(out, NOT_FIXING)
    assert unfixed["patch_successfully_applied"] and not unfixed["resolved"]
    assert unfixed["tests_status"]["FAIL_TO_PASS"]["failure"], unfixed["tests_status"]
    summary = done.stdout
    assert "resolved    │ 3 (42.9%)" in summary and "empty patch │ 2" in summary, summary


def test_instance_reports_equal_the_harness_on_the_same_logs(evaluated: tuple[Path, Any]) -> None:
    """The official ``get_eval_report`` reads each test_output.txt and gives the very same report."""
    out, _ = evaluated
    h = load_harness()
    rows = _rows()
    for prediction in _predictions():
        iid = prediction["instance_id"]
        if not (out / iid / "test_output.txt").exists():
            continue
        row = rows[iid]
        spec = h.test_spec_cls(
            instance_id=iid, image="", eval_script_list=[], repo=row["repo"], version=row["version"],
            FAIL_TO_PASS=json.loads(row["FAIL_TO_PASS"]), PASS_TO_PASS=json.loads(row["PASS_TO_PASS"]),
            log_parser="parse_log_pytest", eval_type="pass_and_fail",
        )  # fmt: skip
        official = h.grading.get_eval_report(spec, prediction, str(out / iid / "test_output.txt"), True)
        assert json.loads((out / iid / "report.json").read_text()) == official, iid


def test_run_report_equals_the_harness_report(
    evaluated: tuple[Path, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``make_run_report`` over the same per-instance reports, laid out where the harness keeps them."""
    out, _ = evaluated
    reporting = importlib.import_module("swebench.harness.reporting")  # after load_harness (the test above)
    predictions = {p["instance_id"]: p for p in _predictions()}
    monkeypatch.chdir(tmp_path)
    for iid in predictions:
        if (out / iid).is_dir():
            target = tmp_path / "logs" / "run_evaluation" / "r1" / "test__model" / iid
            target.mkdir(parents=True)
            for name in ("report.json", "test_output.txt"):
                if (out / iid / name).exists():
                    (target / name).write_text((out / iid / name).read_text())
    dataset = [{"instance_id": iid} for iid in _rows()]
    path = reporting.make_run_report(predictions, dataset, "r1", client=None, report_dir=str(tmp_path))
    assert json.loads((out / "report.json").read_text()) == json.loads(Path(path).read_text())


def test_run_export_eval_round_trip(project_images: None, tmp_path: Path) -> None:
    tasks = "pytoolz__toolz-90004,mahmoud__boltons-90003"
    run = _cli("run", "swebench", "--path", str(INSTANCES), "--tasks", tasks, "-p", "oracle", "--out",
               str(tmp_path / "run"))  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    exported = _cli("export", "--format", "swebench", str(tmp_path / "run"))
    assert exported.returncode == 0, exported.stderr
    assert "2/2 episodes -> 2 predictions" in exported.stdout
    rows = [json.loads(line) for line in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()]
    assert {r["model_name_or_path"] for r in rows} == {"oracle"}  # the run's policy: no model named
    graded = _cli("eval", str(tmp_path / "run" / "predictions.jsonl"), "--path", str(INSTANCES), "--out",
                  str(tmp_path / "eval"), "-c", "2")  # fmt: skip
    assert graded.returncode == 0, graded.stdout[-2000:] + graded.stderr[-2000:]
    report = json.loads((tmp_path / "eval" / "report.json").read_text())
    assert report["resolved_ids"] == sorted(tasks.split(","))


def test_bad_input_is_a_one_line_error(tmp_path: Path) -> None:
    preds = tmp_path / "p.jsonl"
    preds.write_text('{"instance_id": "nope__nope-1", "model_patch": "x"}\n')
    unknown = _cli("eval", str(preds), "--path", str(INSTANCES))
    assert unknown.returncode == 2 and "'nope__nope-1' (" in unknown.stderr, unknown.stderr
    preds.write_text('{"instance_id": "pytoolz__toolz-90001"}\n')
    missing = _cli("eval", str(preds), "--path", str(INSTANCES))
    assert missing.returncode == 2 and "line 1: field 'model_patch' is missing" in missing.stderr
    for done in (unknown, missing):
        assert done.stderr.startswith("error: ") and len(done.stderr.strip().splitlines()) == 1
