"""A run loads its dataset once, whatever ``-c`` is: every environment (and every worker) gets the one
list of tasks the run selected, and no environment is built just to count them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import ares.presets as registry
from ares.cli.main import app
from ares.envs.code_env import CodeEnvironment


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How often HumanEval is parsed and how many environments are built."""
    counts = {"loads": 0, "envs": 0}
    real_load, real_init = registry.load_humaneval, CodeEnvironment.__init__

    def load(*args: Any, **kwargs: Any) -> Any:
        counts["loads"] += 1
        return real_load(*args, **kwargs)

    def init(self: CodeEnvironment, *args: Any, **kwargs: Any) -> None:
        counts["envs"] += 1
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(registry, "load_humaneval", load)
    monkeypatch.setattr(CodeEnvironment, "__init__", init)
    return counts


@pytest.mark.parametrize("concurrency", [1, 8])
def test_ares_run_parses_the_dataset_once(counted: dict[str, int], tmp_path: Path, concurrency: int) -> None:
    args = ["run", "humaneval", "--policy", "oracle", "--tasks", "0:8", "-c", str(concurrency)]
    done = CliRunner().invoke(app, [*args, "--out", str(tmp_path)])
    assert done.exit_code == 0, done.output
    assert counted["loads"] == 1
    assert counted["envs"] == concurrency  # one per worker, none to count the tasks
    assert len(list((tmp_path / "episodes").glob("*.json"))) == 8


def test_validate_parses_the_dataset_once(counted: dict[str, int], tmp_path: Path) -> None:
    args = ["tasks", "validate", "humaneval", "--tasks", "0:3", "--repeats", "1", "-c", "3"]
    done = CliRunner().invoke(app, [*args, "--out", str(tmp_path)])
    assert done.exit_code == 0, done.output
    assert counted["loads"] == 1


def test_make_takes_a_loaded_list_and_refuses_a_second_selection() -> None:
    tasks = registry.load_tasks("humaneval", tasks="0:2")
    env = registry.make("humaneval", task_list=tasks)
    assert [t.id for t in env.tasks] == [t.id for t in tasks]
    with pytest.raises(registry.UnknownPresetError, match="give the selection"):
        registry.make("humaneval", task_list=tasks, tasks="0:1")
