"""Seeding a store from earlier files: a validation report's policy outcomes (never the oracle's
runs) and a run's episode results (what a trainer learns from, masked ones skipped), both
unversioned; a malformed file is a PassRateStoreError naming it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ares.curriculum import PassRateStore, PassRateStoreError, seed_from_run, seed_from_validation


def _report(tmp_path: Path, tasks: list[dict[str, Any]]) -> Path:
    path = tmp_path / "validation.json"
    data = {"format": "ares-task-validation/1", "source": {"preset": "x"}, "tasks": tasks}
    path.write_text(json.dumps(data))
    return path


def _validated(task_id: str, **extra: Any) -> dict[str, Any]:
    return {"task_id": task_id, "verdict": "good", "oracle_rewards": [1.0, 1.0], "null_reward": 0.0, **extra}


def test_a_report_of_todays_format_seeds_nothing(tmp_path: Path) -> None:
    store = PassRateStore()
    assert seed_from_validation(store, _report(tmp_path, [_validated("a"), _validated("b")])) == 0
    assert len(store) == 0


def test_policy_outcomes_seed_unversioned_samples(tmp_path: Path) -> None:
    path = _report(
        tmp_path,
        [
            _validated("a", policy_outcomes=[True, False, None, True]),
            _validated("b"),
            _validated("c", policy_outcomes=[]),
        ],
    )
    store = PassRateStore(window=1)
    assert seed_from_validation(store, path) == 3
    store.record("a", False, 100)  # a later version: the seeded samples stay in the window
    assert (store.get("a").passes, store.get("a").samples) == (2, 4)
    assert "b" not in store and "c" not in store


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("not json", "cannot read"),
        ('{"tasks": {"a": 1}}', "'tasks' is a list of objects"),
        ('{"tasks": [{"task_id": 7}]}', "a task_id is a string"),
        ('{"format": "ares-task-audit/1", "tasks": []}', "not an ares task validation report"),
        ('{"source": {}}', "missing key 'tasks'"),
        ('{"tasks": [{"task_id": "a", "policy_outcomes": [1.0]}]}', "policy_outcomes is a list"),
        ('{"tasks": [{"policy_outcomes": [true]}]}', "missing key 'task_id'"),
    ],
)
def test_a_malformed_report_is_refused(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "validation.json"
    path.write_text(text)
    store = PassRateStore()
    with pytest.raises(PassRateStoreError, match=match) as caught:
        seed_from_validation(store, path)
    assert str(path) in str(caught.value)
    assert len(store) == 0  # nothing half-seeded


def _episode(index: int, task_id: str, status: str = "finished", **fields: Any) -> dict[str, Any]:
    return {
        "index": index, "task_id": task_id, "status": status, "reward": 0.0, "steps": 3, "passed": False,
        "outcome": None, "blame": None, "masked": False, "refills": 0, **fields,
    }  # fmt: skip


def _run(tmp_path: Path, episodes: list[dict[str, Any]]) -> Path:
    (tmp_path / "run" / "episodes").mkdir(parents=True)
    for item in episodes:
        name = f"{item['index']:05d}-{item['task_id']}.json"
        (tmp_path / "run" / "episodes" / name).write_text(json.dumps(item, indent=2))
    (tmp_path / "run" / "episodes" / ".00099-a.json.tmp").write_text("{half")  # a write under way
    return tmp_path / "run"


def test_a_run_seeds_what_a_trainer_would_learn_from(tmp_path: Path) -> None:
    run = _run(
        tmp_path,
        [
            _episode(0, "a", outcome=True, reward=0.5),  # the outcome decides, not the reward
            _episode(1, "a", outcome=False, reward=1.0),
            _episode(2, "a", reward=1.0),  # no outcome: a reward of 1 is a pass
            _episode(3, "b", reward=0.2),
            _episode(4, "b", "errored", reward=None, blame="infra", masked=True),
            _episode(5, "b", "errored", reward=None, blame="task", masked=True),
            _episode(6, "b", "truncated", blame="limit"),  # cut by a limit: the policy's failure
            _episode(7, "c", "errored", reward=None, blame="policy"),  # the policy's own error
            _episode(8, "d", "cancelled", reward=None, blame="infra", masked=True),
        ],
    )
    store = PassRateStore()
    assert seed_from_run(store, run) == 6
    assert {task: (r.passes, r.samples) for task, r in store.rates().items()} == {
        "a": (2, 3), "b": (0, 2), "c": (0, 1),
    }  # fmt: skip
    assert store.newest_version is None


def test_a_run_from_before_masks_counts_only_finished_and_truncated_episodes(tmp_path: Path) -> None:
    old = [_episode(0, "a", reward=1.0), _episode(1, "a", "truncated"), _episode(2, "a", "errored")]
    for item in old:
        del item["masked"], item["blame"], item["outcome"]
    store = PassRateStore()
    assert seed_from_run(store, _run(tmp_path, old)) == 2
    assert (store.get("a").passes, store.get("a").samples) == (1, 2)


def test_a_dir_without_episodes_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PassRateStoreError, match="not an ares run output"):
        seed_from_run(PassRateStore(), tmp_path)


@pytest.mark.parametrize(
    "episode",
    [
        {"task_id": "a"},
        {"task_id": "a", "status": "finished", "outcome": "yes"},
        {"task_id": "a", "status": "finished", "reward": "1"},
        {"task_id": 3, "status": "finished"},
        {"task_id": "a", "status": "finished", "masked": "no"},
        ["a", "finished"],
    ],
)
def test_a_malformed_episode_is_refused_naming_its_file(tmp_path: Path, episode: Any) -> None:
    run = _run(tmp_path, [_episode(0, "a", reward=1.0)])
    bad = run / "episodes" / "00001-a.json"
    bad.write_text(json.dumps(episode))
    store = PassRateStore()
    with pytest.raises(PassRateStoreError, match=r"00001-a\.json"):
        seed_from_run(store, run)
    assert len(store) == 0
