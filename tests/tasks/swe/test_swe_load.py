"""Loading instance files: JSONL, JSON, Parquet, saved datasets, Hub names (faked: no network)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import swe_rows

from ares.errors import TaskError
from ares.tasks.swe.load import load_swe_instances

ALL = [
    swe_rows.swebench,
    swe_rows.swebench5,
    swe_rows.swegym,
    swe_rows.swesmith,
    swe_rows.swerebench,
    swe_rows.r2egym,
]


def _ids(dataset) -> list[str]:
    return [instance.instance_id for instance in dataset]


def _jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_jsonl_of_every_format(tmp_path: Path):
    rows = [
        swe_rows.swebench(),
        swe_rows.swegym(),
        swe_rows.swesmith(),
        swe_rows.swerebench(),
        swe_rows.r2egym(),
    ]
    dataset = load_swe_instances(_jsonl(tmp_path / "mix.jsonl", rows))
    assert [i.format for i in dataset] == ["swebench", "swegym", "swesmith", "swerebench", "r2egym"]
    assert dataset.by_id("getmoto__moto-5752").repo == "getmoto/moto"
    assert dataset.skipped == ()


def test_json_list_instances_and_splits(tmp_path: Path):
    (tmp_path / "a.json").write_text(json.dumps([swe_rows.swebench()]))
    (tmp_path / "b.json").write_text(json.dumps({"instances": [swe_rows.swebench5()]}))
    (tmp_path / "c.json").write_text(
        json.dumps({"train": [swe_rows.swegym()], "test": [swe_rows.swebench()]})
    )
    assert _ids(load_swe_instances(tmp_path / "a.json")) == ["astropy__astropy-12907"]
    assert load_swe_instances(tmp_path / "b.json").instances[0].format == "swebench5"
    assert _ids(load_swe_instances(tmp_path / "c.json", split="train")) == ["getmoto__moto-5752"]
    with pytest.raises(TaskError, match=r"pass --split \(test, train\)"):
        load_swe_instances(tmp_path / "c.json")


def test_parquet_keeps_lists_and_structs(tmp_path: Path):
    pq = pytest.importorskip("pyarrow.parquet")
    pa = pytest.importorskip("pyarrow")
    path = tmp_path / "test-00000-of-00001.parquet"
    pq.write_table(pa.Table.from_pylist([swe_rows.swerebench()]), path)
    pq.write_table(pa.Table.from_pylist([swe_rows.swebench()]), tmp_path / "train-00000-of-00001.parquet")
    instance = load_swe_instances(path).instances[0]
    assert instance.log_parser == "parse_log_pytest"
    assert instance.fail_to_pass == ("tests/test_components.py::test_kA_zero_flow",)
    # A Hub-layout directory: --split picks the files.
    assert _ids(load_swe_instances(tmp_path, split="train")) == ["astropy__astropy-12907"]


def test_saved_datasets_directory(tmp_path: Path):
    datasets = pytest.importorskip("datasets")
    rows = [swe_rows.swebench(), {**swe_rows.swebench(), "instance_id": "astropy__astropy-13033"}]
    datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "one"))
    assert _ids(load_swe_instances(tmp_path / "one")) == ["astropy__astropy-12907", "astropy__astropy-13033"]
    datasets.DatasetDict(
        {"test": datasets.Dataset.from_list(rows[:1]), "dev": datasets.Dataset.from_list(rows[1:])}
    ).save_to_disk(str(tmp_path / "dict"))
    assert _ids(load_swe_instances(tmp_path / "dict", split="dev")) == ["astropy__astropy-13033"]
    with pytest.raises(TaskError, match="pass --split with one of"):
        load_swe_instances(tmp_path / "dict")


def test_hub_name_goes_through_datasets(monkeypatch):
    datasets = pytest.importorskip("datasets")
    calls = []

    def fake_load(name, split):
        calls.append((name, split))
        return [swe_rows.swebench()]

    monkeypatch.setattr(datasets, "load_dataset", fake_load)
    dataset = load_swe_instances("SWE-bench/SWE-bench_Verified")
    assert calls == [("SWE-bench/SWE-bench_Verified", "test")]
    assert dataset.instances[0].source.startswith("SWE-bench/SWE-bench_Verified[test] row 1")

    def offline(name, split):
        raise ConnectionError(
            "Couldn't reach 'SWE-bench/SWE-bench_Verified' on the Hub (LocalEntryNotFoundError)"
        )

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(TaskError, match="needs the network"):
        load_swe_instances("SWE-bench/SWE-bench_Verified", split="test")


def test_bad_rows_fail_or_are_skipped(tmp_path: Path):
    bad_f2p = {**swe_rows.swebench(), "instance_id": "astropy__astropy-13033", "FAIL_TO_PASS": "oops"}
    rows = [swe_rows.swebench(), bad_f2p, {"question": "?"}, swe_rows.swegym(), swe_rows.swebench()]
    path = _jsonl(tmp_path / "bad.jsonl", rows)
    with pytest.raises(TaskError, match=r"bad.jsonl line 2 \(astropy__astropy-13033\): field 'FAIL_TO_PASS'"):
        load_swe_instances(path)
    dataset = load_swe_instances(path, skip_bad=True)
    assert _ids(dataset) == ["astropy__astropy-12907", "getmoto__moto-5752"]
    assert [s.where for s in dataset.skipped] == [f"{path} line 2", f"{path} line 3", f"{path} line 5"]
    assert "repeats" in dataset.skipped[2].reason


def test_file_level_errors(tmp_path: Path):
    (tmp_path / "broken.jsonl").write_text(json.dumps(swe_rows.swebench()) + "\n{not json\n")
    with pytest.raises(TaskError, match=r"broken.jsonl line 2: invalid JSON"):
        load_swe_instances(tmp_path / "broken.jsonl")
    (tmp_path / "rows.csv").write_text("a,b\n")
    with pytest.raises(TaskError, match=r"unknown file type .csv"):
        load_swe_instances(tmp_path / "rows.csv")
    with pytest.raises(TaskError, match="does not exist"):
        load_swe_instances(tmp_path / "missing.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(TaskError, match="holds no instances"):
        load_swe_instances(tmp_path / "empty.jsonl")


def test_task_directory_reads_its_instances_file_not_side_files(tmp_path: Path):
    """A set's directory (``instances.jsonl`` beside specs.json, validation.json, images/) is its rows."""
    _jsonl(tmp_path / "instances.jsonl", [swe_rows.swebench()])
    _jsonl(tmp_path / "instances_swegym.jsonl", [swe_rows.swegym()])  # another shape of the same set
    (tmp_path / "specs.json").write_text(json.dumps({"astropy/astropy": {"4.3": {"test_cmd": "pytest"}}}))
    (tmp_path / "validation.json").write_text(json.dumps({"tasks": []}))
    assert _ids(load_swe_instances(tmp_path)) == ["astropy__astropy-12907"]
    # Without an instances file, every data file but the side files and image dirs is read.
    (tmp_path / "instances.jsonl").unlink()
    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "meta.json").write_text("{}")
    assert _ids(load_swe_instances(tmp_path)) == ["getmoto__moto-5752"]


def test_fixture_directory_loads_as_the_main_file():
    fixtures = Path(__file__).parents[2] / "fixtures" / "swe"
    assert _ids(load_swe_instances(fixtures)) == _ids(load_swe_instances(fixtures / "instances.jsonl"))
