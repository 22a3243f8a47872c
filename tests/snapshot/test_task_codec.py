"""A snapshot's task survives JSON: every field the agents and the oracle read comes back."""

from __future__ import annotations

import json
from pathlib import Path

from ares.envs.snapshots.task_codec import task_from_json, task_to_json
from ares.tasks.harbor import load_harbor_dataset
from ares.tasks.humaneval import load_humaneval

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_a_humaneval_task_round_trips_with_its_solution_file() -> None:
    task = load_humaneval()[0]
    back = task_from_json(json.loads(json.dumps(task_to_json(task))))
    assert back == task
    assert back.solution_file == "solution.py"


def test_a_harbor_task_declaring_a_solution_file_round_trips() -> None:
    task = load_harbor_dataset(FIXTURES / "harbor-single")[0]
    assert task.solution_file is not None
    assert task_from_json(json.loads(json.dumps(task_to_json(task)))) == task


def test_a_swe_task_keeps_its_image_dirs() -> None:
    """The set's image dir travels with the task, so a restored episode can still build its base."""
    from ares.tasks.swe.task import load_swe_tasks

    task = load_swe_tasks(FIXTURES / "swe" / "instances.jsonl")[0]
    assert task.image.image_dirs == ((FIXTURES / "swe" / "images").resolve(),)
    assert task_from_json(json.loads(json.dumps(task_to_json(task)))).image == task.image
