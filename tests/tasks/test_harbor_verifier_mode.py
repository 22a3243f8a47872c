"""``[ares.verifier]`` in task.toml (mode, outputs) and the loader's ``verifier_mode`` option."""

from __future__ import annotations

from pathlib import Path

import pytest

from ares import make
from ares.errors import TaskError
from ares.tasks import load_harbor_dataset, load_harbor_task


def _task_dir(root: Path, toml: str) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    (root / "instruction.md").write_text("Do it.\n")
    (root / "task.toml").write_text(toml)
    return root


def test_default_is_outputs_mode_with_the_workdir_as_output(tmp_path: Path) -> None:
    task = load_harbor_task(_task_dir(tmp_path / "t", '[environment]\nworkdir = "/app"\n'))
    assert task.verifier_mode == "outputs" and task.outputs == () and task.output_paths == ("/app",)


def test_mode_and_outputs_from_the_ares_table(tmp_path: Path) -> None:
    toml = '[ares.verifier]\nmode = "full"\noutputs = ["/app/", "/etc/app.conf"]\n'
    task = load_harbor_task(_task_dir(tmp_path / "t", toml))
    assert task.verifier_mode == "full" and task.output_paths == ("/app", "/etc/app.conf")


def test_loader_option_overrides_the_file(tmp_path: Path) -> None:
    root = _task_dir(tmp_path / "d" / "t", '[ares.verifier]\nmode = "full"\n')
    assert load_harbor_task(root, verifier_mode="outputs").verifier_mode == "outputs"
    dataset = load_harbor_dataset(tmp_path / "d", verifier_mode="outputs")
    assert [t.verifier_mode for t in dataset] == ["outputs"]
    env = make("harbor", path=tmp_path / "d", verifier_mode="outputs")
    assert env.tasks[0].verifier_mode == "outputs"
    with pytest.raises(TaskError, match="verifier mode"):
        load_harbor_task(root, verifier_mode="everything")  # type: ignore[arg-type]
    # make()'s verifier_mode applies to every preset's tasks, and is checked
    assert {t.verifier_mode for t in make("humaneval", tasks="0:3", verifier_mode="in-place").tasks} == {
        "in-place"
    }
    with pytest.raises(ValueError, match="verifier_mode"):
        make("humaneval", verifier_mode="everything")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("toml", "fragment"),
    [
        ('[ares.verifier]\nmode = "all"\n', "[ares.verifier] mode is 'all'"),
        ("[ares.verifier]\nmode = 1\n", "must be a string"),
        ('[ares.verifier]\noutputs = "/app"\n', "must be a list of absolute paths"),
        ('[ares.verifier]\noutputs = ["app"]\n', "must be a list of absolute paths"),
        ('[ares.verifier]\noutputs = ["/"]\n', "whole filesystem"),
        ('ares = "x"\n', "[ares] must be a table"),
    ],
)
def test_bad_extension_values_name_the_key(tmp_path: Path, toml: str, fragment: str) -> None:
    with pytest.raises(TaskError) as info:
        load_harbor_task(_task_dir(tmp_path / "t", toml))
    assert fragment in str(info.value)
