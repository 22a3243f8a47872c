"""Harbor loader: field mapping, validation messages, and the fixture tasks run for real on the host."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ares.errors import TaskConfigWarning, TaskError, TaskNotFoundError
from ares.sandbox.base import ImageSpec, Resources
from ares.tasks import Task, load_harbor_dataset, load_harbor_task

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GOOD = FIXTURES / "harbor"
BROKEN = FIXTURES / "harbor_broken"


def _make_task(root: Path, toml: str = "", instruction: str = "Do it.\n", name: str = "t") -> Path:
    task = root / name
    (task / "tests").mkdir(parents=True)
    (task / "tests" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    (task / "instruction.md").write_text(instruction)
    (task / "task.toml").write_text(toml)
    return task


def _error(root: Path, toml: str) -> str:
    with pytest.raises(TaskError) as info:
        load_harbor_task(_make_task(root, toml))
    return str(info.value)


# --- the fixture tasks ---------------------------------------------------------------------------


def test_hello_file_fields() -> None:
    task = load_harbor_task(GOOD / "hello-file")
    assert task.id == "hello-file"
    assert task.instruction.startswith("Create a file named `hello.txt`")
    assert task.tests == GOOD.resolve() / "hello-file" / "tests"
    assert task.solution == GOOD.resolve() / "hello-file" / "solution"
    assert task.image == ImageSpec(dockerfile_dir=GOOD.resolve() / "hello-file" / "environment")
    assert task.resources == Resources(cpus=1.0, memory_mb=1024, storage_mb=2048)
    assert task.network is False
    assert task.workdir == "/app"
    assert task.agent_timeout_s == 120.0
    assert task.command_timeout_s == 120.0
    assert task.verifier_timeout_s == 30.0
    assert task.verifier_env == {"EXPECTED_TEXT": "Hello, ARES!"}
    assert task.env == {}
    assert task.workspace == {}
    assert task.source == "harbor"
    assert task.metadata["difficulty"] == "easy"
    assert task.metadata["tags"] == ["trivial", "files"]
    assert task.metadata["version"] == "1.0"


def test_fix_bug_fields() -> None:
    task = load_harbor_task(GOOD / "fix-bug")
    assert task.image == ImageSpec()
    assert task.resources == Resources(cpus=2.0, memory_mb=512)
    assert task.network is False
    assert task.env == {"PYTHONDONTWRITEBYTECODE": "1"}
    assert (task.agent_timeout_s, task.verifier_timeout_s) == (300.0, 60.0)


def test_json_reward_fields() -> None:
    task = load_harbor_task(GOOD / "json-reward")
    assert task.image == ImageSpec(name="python:3.11-slim")
    assert task.resources == Resources(memory_mb=1024, storage_mb=1024)
    assert task.verifier_env == {"FIZZBUZZ_N": "30"}


def test_dataset_is_sorted_by_name() -> None:
    tasks = load_harbor_dataset(GOOD)
    assert [t.id for t in tasks] == ["fix-bug", "hello-file", "json-reward", "pytest-app"]
    assert all(isinstance(t, Task) and t.workdir == "/app" for t in tasks)


def test_task_dir_is_a_one_task_dataset() -> None:
    assert [t.id for t in load_harbor_dataset(GOOD / "hello-file")] == ["hello-file"]


def test_accepts_str_paths() -> None:
    assert load_harbor_task(str(GOOD / "fix-bug")).id == "fix-bug"  # type: ignore[arg-type]


def _run(script: Path, workdir: Path, logs: Path, env: dict[str, str]) -> None:
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    full_env = {**os.environ, "PATH": path, "ARES_LOGS_DIR": str(logs), **env}
    subprocess.run(["bash", str(script)], cwd=workdir, env=full_env, capture_output=True, timeout=60)


def _reward(task: Task, tmp_path: Path, solve: bool, **env: str) -> dict[str, float]:
    """Runs the oracle (optionally) and then test.sh on the host, as the sandbox would."""
    workdir, logs = tmp_path / "app", tmp_path / "logs"
    workdir.mkdir(parents=True, exist_ok=True)
    run_env = {**task.env, **task.verifier_env, **env}
    if solve:
        assert isinstance(task.solution, Path)
        _run(task.solution / "solve.sh", workdir, logs, dict(task.env))
    assert isinstance(task.tests, Path)
    _run(task.tests / "test.sh", workdir, logs, run_env)
    reward_json, reward_txt = logs / "verifier" / "reward.json", logs / "verifier" / "reward.txt"
    if reward_json.is_file():
        return json.loads(reward_json.read_text())
    return {"reward": float(reward_txt.read_text())}


@pytest.mark.parametrize("name", ["hello-file", "fix-bug"])
def test_fixture_scores_zero_unsolved_and_one_solved(name: str, tmp_path: Path) -> None:
    task = load_harbor_task(GOOD / name)
    assert _reward(task, tmp_path / "unsolved", solve=False) == {"reward": 0.0}
    assert _reward(task, tmp_path / "solved", solve=True) == {"reward": 1.0}


def test_hello_file_uses_verifier_env(tmp_path: Path) -> None:
    task = load_harbor_task(GOOD / "hello-file")
    assert _reward(task, tmp_path, solve=True, EXPECTED_TEXT="Goodbye") == {"reward": 0.0}


def test_fix_bug_rejects_the_original_buggy_module(tmp_path: Path) -> None:
    task = load_harbor_task(GOOD / "fix-bug")
    (tmp_path / "app").mkdir()
    buggy = (
        "def mean(v):\n    return sum(v) / len(v)\n\n\ndef median(v):\n    return sorted(v)[len(v) // 2]\n"
    )
    (tmp_path / "app" / "stats.py").write_text(buggy)
    assert _reward(task, tmp_path, solve=False) == {"reward": 0.0}


def test_json_reward_terms(tmp_path: Path) -> None:
    task = load_harbor_task(GOOD / "json-reward")
    zero = {"file_exists": 0.0, "runs": 0.0, "correct_lines": 0.0}
    assert _reward(task, tmp_path / "unsolved", solve=False) == zero
    solved = _reward(task, tmp_path / "solved", solve=True)
    assert solved == pytest.approx({"file_exists": 0.1, "runs": 0.2, "correct_lines": 0.7})
    assert math.fsum(solved.values()) == pytest.approx(1.0)
    partial = tmp_path / "partial"
    (partial / "app").mkdir(parents=True)
    (partial / "app" / "fizzbuzz.py").write_text(
        "import sys\nfor i in range(1, int(sys.argv[1]) + 1):\n    print(i)\n"
    )
    terms = _reward(task, partial, solve=False)
    assert (terms["file_exists"], terms["runs"]) == (0.1, 0.2)
    assert 0.0 < terms["correct_lines"] < 0.7


# --- broken fixtures -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "fragments"),
    [
        ("no-task-toml", ["no task.toml"]),
        ("bad-toml", ["task.toml", "invalid TOML", "line 3"]),
        ("missing-test-sh", ["tests/test.sh", "missing"]),
        ("bad-network-mode", ["task.toml", "network_mode", "'wifi'", '"none"', '"public"']),
        ("bad-timeout-type", ["task.toml", "[agent] timeout_sec", "'abc'", "timeout_sec = 600"]),
        ("empty-instruction", ["instruction.md", "empty"]),
    ],
)
def test_broken_fixture_errors(name: str, fragments: list[str]) -> None:
    with pytest.raises(TaskError) as info:
        load_harbor_task(BROKEN / name)
    message = str(info.value)
    assert str(BROKEN.resolve() / name) in message
    for fragment in fragments:
        assert fragment in message


def test_broken_task_in_dataset_fails_the_load() -> None:
    with pytest.raises(TaskError, match="bad-network-mode"):
        load_harbor_dataset(BROKEN)


# --- validation and mapping details --------------------------------------------------------------


def test_missing_and_non_directory_paths(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="does not exist"):
        load_harbor_task(tmp_path / "nope")
    (tmp_path / "file").write_text("x")
    with pytest.raises(TaskError, match="not a directory"):
        load_harbor_task(tmp_path / "file")
    with pytest.raises(TaskError, match="does not exist"):
        load_harbor_dataset(tmp_path / "nope")


def test_missing_instruction(tmp_path: Path) -> None:
    task = _make_task(tmp_path)
    (task / "instruction.md").unlink()
    with pytest.raises(TaskError, match=r"instruction\.md is missing"):
        load_harbor_task(task)


def test_empty_toml_gives_defaults(tmp_path: Path) -> None:
    task = load_harbor_task(_make_task(tmp_path, ""))
    defaults = Task(id="x", instruction="", tests={})
    assert task.workdir == defaults.workdir
    assert task.network is False
    assert task.resources == Resources()
    assert task.image == ImageSpec()
    assert task.solution is None
    assert (task.agent_timeout_s, task.verifier_timeout_s) == (600.0, 300.0)
    assert task.metadata == {}


@pytest.mark.parametrize(
    ("toml", "network"),
    [
        ('[environment]\nnetwork_mode = "none"', False),
        ('[environment]\nnetwork_mode = "no-network"', False),
        ('[environment]\nnetwork_mode = "public"', True),
        ('[environment]\nnetwork_mode = "bridge"', True),
        ('[environment]\nnetwork_mode = "host"', True),
        ('[environment]\nnetwork_mode = "Public"', True),
        ("[environment]\nallow_internet = true", True),
        ("[environment]\nallow_internet = false", False),
        ('[environment]\nallow_internet = true\nnetwork_mode = "public"', True),
    ],
)
def test_network_settings(tmp_path: Path, toml: str, network: bool) -> None:
    assert load_harbor_task(_make_task(tmp_path, toml)).network is network


def test_network_conflict_and_bad_types(tmp_path: Path) -> None:
    message = _error(tmp_path / "a", '[environment]\nallow_internet = false\nnetwork_mode = "public"')
    assert "contradicts allow_internet" in message
    assert "must be true or false" in _error(tmp_path / "b", '[environment]\nallow_internet = "yes"')
    assert "must be a string" in _error(tmp_path / "c", "[environment]\nnetwork_mode = 1")


@pytest.mark.parametrize(
    ("memory", "mb"),
    [("2G", 2048), ("2GB", 2048), ("2Gi", 2048), ("512M", 512), ("512mb", 512), ("1.5G", 1536)],
)
def test_memory_strings(tmp_path: Path, memory: str, mb: int) -> None:
    task = load_harbor_task(_make_task(tmp_path, f'[environment]\nmemory = "{memory}"\nstorage = "{memory}"'))
    assert task.resources == Resources(memory_mb=mb, storage_mb=mb)


@pytest.mark.parametrize("memory", ['"2 lots"', '"2048"', '"0G"', "2048", '"-1G"'])
def test_bad_memory(tmp_path: Path, memory: str) -> None:
    message = _error(tmp_path, f"[environment]\nmemory = {memory}")
    assert "[environment] memory" in message and "memory_mb = 2048" in message


def test_memory_and_memory_mb_together(tmp_path: Path) -> None:
    assert "both set" in _error(tmp_path, '[environment]\nmemory = "1G"\nmemory_mb = 1024')


@pytest.mark.parametrize(
    ("toml", "fragment"),
    [
        ("[agent]\ntimeout_sec = -5", "[agent] timeout_sec must be a positive number"),
        ("[agent]\ntimeout_sec = true", "[agent] timeout_sec must be a positive number"),
        ('[verifier]\ntimeout_sec = "60"', "[verifier] timeout_sec must be a positive number"),
        ('[environment]\ncpus = "two"', "[environment] cpus must be a positive number"),
        ("[environment]\nmemory_mb = 0", "[environment] memory_mb must be a positive number"),
        ("[environment]\nenv = { PORT = 8080 }", "[environment] env values must be strings"),
        ('[verifier]\nenv = "A=1"', "[verifier] env must be a table"),
        ('[environment]\nworkdir = "app"', "[environment] workdir must be an absolute path"),
        ('[environment]\ndocker_image = ""', "[environment] docker_image is empty"),
        ("[environment]\ndocker_image = 3", "[environment] docker_image must be a string"),
        ('metadata = "x"', "[metadata] must be a table"),
        ('agent = "x"', "[agent] must be a table"),
        ("version = 1", "version must be a string"),
    ],
)
def test_wrong_types_name_field_and_file(tmp_path: Path, toml: str, fragment: str) -> None:
    message = _error(tmp_path, toml)
    assert fragment in message
    assert str((tmp_path / "t" / "task.toml").resolve()) in message


def test_env_timeouts_and_unknown_keys(tmp_path: Path) -> None:
    toml = """
        [agent]
        timeout_sec = 30
        future_option = 1

        [verifier]
        timeout_sec = 45.5
        env = { MODE = "strict" }

        [environment]
        build_timeout_sec = 600.0
        env = { A = "1", B = "two" }

        [some_future_table]
        x = 1
    """
    with pytest.warns(TaskConfigWarning) as caught:  # unknown names load, with a warning each
        task = load_harbor_task(_make_task(tmp_path, "\n".join(line.strip() for line in toml.splitlines())))
    assert [str(w.message) for w in caught] == [
        "task.toml of t: unknown key future_option in [agent]",
        "task.toml of t: unknown table [some_future_table]",
    ]
    assert (task.agent_timeout_s, task.verifier_timeout_s) == (30.0, 45.5)
    assert task.command_timeout_s == 30.0  # never longer than the whole agent budget
    assert task.env == {"A": "1", "B": "two"}
    assert task.verifier_env == {"MODE": "strict"}


def test_metadata_keeps_its_own_version_key(tmp_path: Path) -> None:
    task = load_harbor_task(_make_task(tmp_path, 'version = "1.0"\n[metadata]\nversion = "3"\nowner = "me"'))
    assert task.metadata == {"version": "3", "owner": "me"}


def test_workdir_from_dockerfile_final_stage(tmp_path: Path) -> None:
    root = _make_task(tmp_path)
    (root / "environment").mkdir()
    (root / "environment" / "Dockerfile").write_text(
        "FROM python:3.11 AS build\nWORKDIR /build\n"
        "FROM python:3.11-slim\nworkdir /srv\nWORKDIR app\nWORKDIR $HOME/ignored\n"
    )
    task = load_harbor_task(root)
    assert task.workdir == "/srv/app"
    assert task.image.dockerfile_dir == root.resolve() / "environment"


def test_toml_workdir_beats_dockerfile(tmp_path: Path) -> None:
    root = _make_task(tmp_path, '[environment]\nworkdir = "/work/"')
    (root / "environment").mkdir()
    (root / "environment" / "Dockerfile").write_text("FROM debian:12\nWORKDIR /app\n")
    assert load_harbor_task(root).workdir == "/work"


def test_solution_dir_without_solve_sh(tmp_path: Path) -> None:
    root = _make_task(tmp_path)
    (root / "solution").mkdir()
    with pytest.raises(TaskError, match=r"solution has no solve\.sh"):
        load_harbor_task(root)


def test_invalid_utf8_instruction(tmp_path: Path) -> None:
    root = _make_task(tmp_path)
    (root / "instruction.md").write_bytes(b"\xff\xfe bad")
    with pytest.raises(TaskError, match="not valid UTF-8"):
        load_harbor_task(root)


def test_dataset_skips_hidden_dirs_files_and_unrelated_dirs(tmp_path: Path) -> None:
    _make_task(tmp_path, name="b-task")
    _make_task(tmp_path, name="a-task")
    _make_task(tmp_path, name=".hidden")
    (tmp_path / "assets").mkdir()
    (tmp_path / "README.md").write_text("dataset")
    assert [t.id for t in load_harbor_dataset(tmp_path)] == ["a-task", "b-task"]


def test_dataset_reports_task_dir_missing_toml(tmp_path: Path) -> None:
    (_make_task(tmp_path, name="ok") / "task.toml").rename(tmp_path / "elsewhere.toml")
    with pytest.raises(TaskError, match=r"no task\.toml"):
        load_harbor_dataset(tmp_path)


def test_empty_dataset(tmp_path: Path) -> None:
    (tmp_path / "not-a-task").mkdir()
    with pytest.raises(TaskNotFoundError, match="no Harbor task directories"):
        load_harbor_dataset(tmp_path)
