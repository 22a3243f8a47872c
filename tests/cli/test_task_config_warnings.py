"""Unknown tables and keys in a Harbor task.toml (typos such as ``[agnet]``): a warning naming the
nearest known name, once per task however many episodes run; with ``--strict`` one error line and
exit 2 before anything runs. The known names are exactly what the loader reads."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from ares.errors import TaskConfigWarning
from ares.tasks import load_harbor_dataset, load_harbor_task

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
WARNINGS = [
    "warning: task.toml of hello-file: unknown key memroy_mb in [environment] (did you mean memory_mb?)",
    "warning: task.toml of hello-file: unknown table [agnet] (did you mean [agent]?)",
]


def ares(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ARES_IMAGE_FALLBACK": os.environ.get("ARES_IMAGE_FALLBACK", "offline")}
    return subprocess.run(
        [sys.executable, "-m", "ares.cli.main", *args], capture_output=True, text=True, env=env, timeout=600
    )


@pytest.fixture
def misspelt(tmp_path: Path) -> Path:
    """The hello-file fixture with a misspelt key in [environment] and a misspelt [agent] table."""
    task = shutil.copytree(FIXTURES / "harbor" / "hello-file", tmp_path / "set" / "hello-file")
    toml = task / "task.toml"
    text = toml.read_text().replace("[environment]\n", "[environment]\nmemroy_mb = 512\n")
    toml.write_text(text + "\n[agnet]\ntimeout_sec = 60.0\n")
    return task.parent


def _loaded_warnings(path: Path) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_harbor_dataset(path)
    return [str(w.message) for w in caught if issubclass(w.category, TaskConfigWarning)]


def test_run_warns_once_per_task_with_the_nearest_name(misspelt: Path, tmp_path: Path) -> None:
    done = ares("run", "harbor", "--path", str(misspelt), "--policy", "oracle", "-n", "2", "-c", "2",
                "--out", str(tmp_path / "run"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert [line for line in done.stderr.splitlines() if line.startswith("warning:")] == WARNINGS
    assert "episodes 2/2  pass 2/2" in done.stdout  # the task still loads and runs


def test_strict_refuses_before_anything_runs(misspelt: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    for args in (
        ["run", "harbor", "--path", str(misspelt), "--policy", "oracle", "--strict", "--out", str(out)],
        ["tasks", "validate", str(misspelt), "--strict", "--out", str(out)],
    ):
        done = ares(*args)
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip().splitlines() == [
            f"error: {WARNINGS[0].removeprefix('warning: ')}; and 1 more (--strict refuses unknown "
            "task.toml names; fix or remove them)"
        ]
        assert not out.exists()  # nothing ran, nothing was written


def test_valid_fixtures_load_without_a_warning_even_strict(tmp_path: Path) -> None:
    for source in ("harbor", "harbor-single"):
        assert _loaded_warnings(FIXTURES / source) == []
    done = ares("run", "harbor", "--path", str(FIXTURES / "harbor" / "hello-file"), "--strict",
                "--out", str(tmp_path / "run"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr


def test_nested_tables_top_level_keys_and_harbor_keys(tmp_path: Path) -> None:
    task = shutil.copytree(FIXTURES / "harbor" / "hello-file", tmp_path / "t")
    toml = task / "task.toml"
    toml.write_text(
        'versoin = "1.0"\n'
        "[metadata]\nanything_goes = 1\n"  # free-form: nothing there is unknown
        '[agent]\ntimeout_sec = 60.0\nuser = "agent"\n'  # Harbor's user: known, not used
        '[environment]\nbuild_timeout_sec = 600.0\ngpus = 0\nnetwork_mode = "none"\n'
        "[environment.extra]\nx = 1\n"
        '[ares.verfier]\nmode = "full"\n'
        '[ares.agent]\nsolution_fil = "a.py"\n'
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_harbor_task(task)
    assert [str(w.message) for w in caught] == [
        "task.toml of t: unknown key versoin (did you mean version?)",
        "task.toml of t: unknown table [environment.extra]",
        "task.toml of t: unknown table [ares.verfier] (did you mean [ares.verifier]?)",
        "task.toml of t: unknown key solution_fil in [ares.agent] (did you mean solution_file?)",
    ]
    assert all(w.category is TaskConfigWarning for w in caught)
