"""The SWE-bench-format fixtures in tests/fixtures/swe/ are well formed and self-consistent.

Made by scripts/swe_fixtures/make_instances.py from real test runs; this checks the files, not the runs
(``check_images.py`` grades them in built images).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

SWE = Path(__file__).resolve().parents[1] / "fixtures" / "swe"
FIELDS_4X = {
    "repo",
    "instance_id",
    "base_commit",
    "patch",
    "test_patch",
    "problem_statement",
    "hints_text",
    "created_at",
    "version",
    "FAIL_TO_PASS",
    "PASS_TO_PASS",
    "environment_setup_commit",
}
PROJECTS = {
    "pytoolz/toolz": "toolz",
    "python-poetry/tomlkit": "tomlkit",
    "marshmallow-code/marshmallow": "marshmallow",
    "mahmoud/boltons": "boltons",
    "pallets/click": "click",
}


def rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (SWE / name).read_text().splitlines()]


def touched(diff: str) -> set[str]:
    return {line[len("+++ b/") :] for line in diff.splitlines() if line.startswith("+++ b/")}


def is_test_file(path: str) -> bool:
    return "/tests/" in f"/{path}" or Path(path).name.startswith("test_")


def test_4x_rows_have_the_official_shape() -> None:
    data = rows("instances.jsonl")
    assert len(data) >= 25
    assert {r["repo"] for r in data} == set(PROJECTS)
    for row in data:
        assert set(row) == FIELDS_4X, row["instance_id"]
        assert row["environment_setup_commit"] == row["base_commit"]
        assert len(row["base_commit"]) == 40
        f2p, p2p = json.loads(row["FAIL_TO_PASS"]), json.loads(row["PASS_TO_PASS"])
        assert f2p and isinstance(p2p, list) and not set(f2p) & set(p2p)
        assert all(" " not in t for t in f2p + p2p)
        assert touched(row["patch"]) and not any(is_test_file(p) for p in touched(row["patch"]))
        assert touched(row["test_patch"]) and all(is_test_file(p) for p in touched(row["test_patch"]))
        files = touched(row["test_patch"])
        assert all(t.split("::")[0] in files for t in f2p + p2p)
        for path in touched(row["patch"]):
            assert Path(path).name not in row["problem_statement"]


def test_other_shapes_carry_the_same_instances() -> None:
    by_id = {r["instance_id"]: r for r in rows("instances.jsonl")}
    five = rows("instances_5x.jsonl")
    gym = rows("instances_swegym.jsonl")
    assert five and gym
    for row in five:
        base = by_id[row["instance_id"]]
        assert {k: row[k] for k in FIELDS_4X} == base
        assert row["log_parser"] == "pytest" and row["image"].startswith("ares-swe/")
        assert row["test_patch"] in row["eval_script"] and "pytest -rA" in row["eval_script"]
    for row in gym:
        base = by_id[row["instance_id"]]
        assert row["FAIL_TO_PASS"] == json.loads(base["FAIL_TO_PASS"])
        assert row["PASS_TO_PASS"] == json.loads(base["PASS_TO_PASS"])


@pytest.mark.parametrize("repo", sorted(PROJECTS))
def test_bundle_holds_each_base_commit_as_a_root_commit(repo: str, tmp_path: Path) -> None:
    name = PROJECTS[repo]
    bundle = SWE / "images" / name / f"{name}.bundle"
    assert (SWE / "repos" / f"{name}.bundle").resolve() == bundle.resolve()
    heads = subprocess.run(
        ["git", "bundle", "list-heads", str(bundle)], capture_output=True, text=True, check=True
    ).stdout
    refs = dict(reversed(line.split()) for line in heads.splitlines())
    expected = {f"refs/heads/{r['instance_id']}": r["base_commit"] for r in rows("instances.jsonl")}
    assert {k: v for k, v in expected.items() if k.split("/")[2].startswith(repo.replace("/", "__"))} == refs
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(
        ["git", "-C", str(tmp_path), "fetch", "-q", str(bundle), "refs/heads/*:refs/heads/*"], check=True
    )
    for commit in refs.values():
        parents = subprocess.run(
            ["git", "-C", str(tmp_path), "rev-list", "--parents", "-n", "1", commit],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert parents == [commit]  # no parent: the fixed release is not in the history
    dockerfile = (SWE / "images" / name / "Dockerfile").read_text()
    assert dockerfile.startswith("#") and "FROM ares/host-python" in dockerfile
    for row in rows("instances.jsonl"):
        if row["repo"] == repo:
            text = (SWE / "images" / "instances" / row["instance_id"] / "Dockerfile").read_text()
            assert row["base_commit"] in text


def test_validation_records_every_instance() -> None:
    ids = {r["instance_id"] for r in rows("instances.jsonl")}
    host = json.loads((SWE / "validation.json").read_text())
    images = json.loads((SWE / "image_validation.json").read_text())
    assert set(host) == ids and set(images) == ids
    assert all(v["ok"] and v["repo_state"]["commits"] == "1" for v in images.values())
