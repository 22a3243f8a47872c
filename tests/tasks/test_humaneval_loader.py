"""HumanEval tasks: loading, and the real oracle/checker scripts run on the host in temp dirs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from ares.tasks import Task, load_humaneval

SAMPLE = (0, 10, 32, 38, 50, 69, 129, 163)  # includes helpers used by tests and quote-heavy prompts


@dataclass(frozen=True)
class Layout:
    """A host stand-in for the sandbox's /workspace, /tests, /solution and /logs."""

    workdir: Path
    tests: Path
    solution: Path
    logs: Path
    verifier_env: Mapping[str, str]

    @property
    def reward(self) -> Path:
        return self.logs / "verifier" / "reward.txt"

    def env(self, **extra: str) -> dict[str, str]:
        # The venv's python3 first on PATH: a fast, known interpreter instead of a version shim.
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        env = {**os.environ, "PATH": path, "ARES_WORKDIR": str(self.workdir), "ARES_LOGS_DIR": str(self.logs)}
        return {**env, **extra}


def _write(files: Mapping[str, bytes | str], dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        data = content.encode() if isinstance(content, str) else content
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        (dest / name).write_bytes(data)


def _materialize(task: Task, root: Path) -> Layout:
    layout = Layout(root / "workspace", root / "tests", root / "solution", root / "logs", task.verifier_env)
    assert isinstance(task.tests, Mapping) and isinstance(task.solution, Mapping)
    _write(task.workspace, layout.workdir)
    _write(task.tests, layout.tests)
    _write(task.solution, layout.solution)
    return layout


def _bash(script: Path, layout: Layout, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(script)],
        cwd=layout.workdir,
        env=layout.env(**extra),
        capture_output=True,
        text=True,
        timeout=120,
    )


def _verify(layout: Layout, **extra: str) -> float:
    result = _bash(layout.tests / "test.sh", layout, **layout.verifier_env, **extra)
    assert layout.reward.is_file(), f"no reward written: {result.stdout}{result.stderr}"
    return float(layout.reward.read_text())


def _solve(layout: Layout) -> None:
    result = _bash(layout.solution / "solve.sh", layout)
    assert result.returncode == 0, result.stderr


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    return load_humaneval()


def _run_all(tasks: list[Task], root: Path, prepare: Callable[[Task, Layout], None]) -> dict[str, float]:
    def one(task: Task) -> tuple[str, float]:
        layout = _materialize(task, root / task.id)
        prepare(task, layout)
        return task.id, _verify(layout)

    with ThreadPoolExecutor(max_workers=max(4, 2 * (os.cpu_count() or 1))) as pool:
        return dict(pool.map(one, tasks))


def _with_body(task: Task, body: str) -> str:
    prompt = task.workspace["solution.py"]
    assert isinstance(prompt, str)
    return prompt.rstrip("\n") + "\n" + body


# --- loading -----------------------------------------------------------------------------------


def test_loads_all_164_with_safe_unique_ids(tasks: list[Task]) -> None:
    assert len(tasks) == 164
    ids = [t.id for t in tasks]
    assert ids[0] == "humaneval_0" and ids[-1] == "humaneval_163"
    assert len(set(ids)) == 164
    assert all(re.fullmatch(r"[a-z0-9_]+", i) for i in ids)
    assert [t.metadata["task_id"] for t in tasks] == [f"HumanEval/{n}" for n in range(164)]


def test_task_fields(tasks: list[Task]) -> None:
    task = tasks[0]
    assert task.workdir == "/workspace"
    assert task.network is False
    assert (task.command_timeout_s, task.verifier_timeout_s, task.agent_timeout_s) == (60, 60, 600)
    assert task.source == "humaneval"
    assert task.metadata["entry_point"] == "has_close_elements"
    assert isinstance(task.tests, Mapping) and "test.sh" in task.tests and "check.py" in task.tests
    assert isinstance(task.solution, Mapping) and set(task.solution) == {"solve.sh", "solution.py"}
    assert task.solution_file == "solution.py"
    prompt = task.workspace["solution.py"]
    assert isinstance(prompt, str) and "def has_close_elements(" in prompt
    assert "canonical" not in repr(task.workspace)


def test_instruction_names_file_and_function(tasks: list[Task]) -> None:
    text = tasks[12].instruction
    assert "solution.py" in text and f"`{tasks[12].metadata['entry_point']}`" in text
    assert "signature" in text and "/workspace" in text


def test_hidden_tests_are_not_in_the_workspace_or_instruction(tasks: list[Task]) -> None:
    for task in tasks[:20]:
        assert "def check(candidate)" not in task.instruction
        assert all("def check(candidate)" not in str(c) for c in task.workspace.values())


def test_results_are_cached_but_callers_get_their_own_list() -> None:
    first = load_humaneval()
    first.clear()
    second = load_humaneval()
    assert len(second) == 164
    assert second[5] is load_humaneval()[5]


# --- scripts, run for real on the host -----------------------------------------------------------


def test_canonical_solutions_score_one_for_all_164(tasks: list[Task], tmp_path: Path) -> None:
    rewards = _run_all(tasks, tmp_path, lambda _task, layout: _solve(layout))
    assert {k: v for k, v in rewards.items() if v != 1.0} == {}


def test_unmodified_prompt_scores_zero_for_all_164(tasks: list[Task], tmp_path: Path) -> None:
    rewards = _run_all(tasks, tmp_path, lambda _task, _layout: None)
    assert {k: v for k, v in rewards.items() if v != 0.0} == {}


def test_stub_returning_none_fails_the_hidden_tests_for_all_164(tasks: list[Task], tmp_path: Path) -> None:
    # Unlike the bare prompt, this passes the "unfinished" guard, so the hidden tests must reject it.
    def stub(task: Task, layout: Layout) -> None:
        (layout.workdir / "solution.py").write_text(_with_body(task, "    return None\n"))

    rewards = _run_all(tasks, tmp_path, stub)
    assert {k: v for k, v in rewards.items() if v != 0.0} == {}


@pytest.mark.parametrize("index", SAMPLE)
def test_sample_oracle_then_verifier(tasks: list[Task], tmp_path: Path, index: int) -> None:
    layout = _materialize(tasks[index], tmp_path)
    assert _verify(layout) == 0.0
    _solve(layout)
    assert _verify(layout) == 1.0


def test_solve_sh_writes_content_byte_for_byte(tasks: list[Task], tmp_path: Path) -> None:
    for index in SAMPLE:
        layout = _materialize(tasks[index], tmp_path / str(index))
        _solve(layout)
        written = (layout.workdir / "solution.py").read_text()
        assert written.startswith(str(tasks[index].workspace["solution.py"]))
        assert "ARES_B64_END" not in written


BROKEN = {
    "raises": "    raise RuntimeError('not today')\n",
    "raises_on_import": "    return 1\nraise ImportError('boom')\n",
    "syntax_error": "    return (\n",
    "exits_on_import": "    return 1\nimport sys\nsys.exit(0)\n",
    "hard_exit_on_import": "    return 1\nimport os\nos._exit(0)\n",
    "forges_reward": (
        "    return 1\nimport os, pathlib\n"
        "p = pathlib.Path(os.environ['ARES_LOGS_DIR'], 'verifier', 'reward.txt')\n"
        "p.write_text('1.0')\nos._exit(0)\n"
    ),
    "wrong_answer": "    return 12345\n",
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_solutions_score_zero(tasks: list[Task], tmp_path: Path, name: str) -> None:
    layout = _materialize(tasks[0], tmp_path)
    (layout.workdir / "solution.py").write_text(_with_body(tasks[0], BROKEN[name]))
    assert _verify(layout) == 0.0


def test_renamed_function_scores_zero(tasks: list[Task], tmp_path: Path) -> None:
    layout = _materialize(tasks[0], tmp_path)
    _solve(layout)
    code = (layout.workdir / "solution.py").read_text().replace("has_close_elements", "close_ones")
    (layout.workdir / "solution.py").write_text(code)
    assert _verify(layout) == 0.0


def test_missing_solution_file_scores_zero(tasks: list[Task], tmp_path: Path) -> None:
    layout = _materialize(tasks[0], tmp_path)
    (layout.workdir / "solution.py").unlink()
    assert _verify(layout) == 0.0


def test_looping_solution_is_stopped_and_scores_zero(tasks: list[Task], tmp_path: Path) -> None:
    layout = _materialize(tasks[0], tmp_path)
    (layout.workdir / "solution.py").write_text(_with_body(tasks[0], "    while True:\n        pass\n"))
    assert _verify(layout, ARES_CHECK_TIMEOUT_S="1") == 0.0


def test_solution_may_import_helper_modules_from_workdir(tasks: list[Task], tmp_path: Path) -> None:
    layout = _materialize(tasks[2], tmp_path)  # truncate_number(number) -> number % 1.0
    (layout.workdir / "helpers.py").write_text("def frac(x):\n    return x % 1.0\n")
    code = "from helpers import frac\n\n" + _with_body(tasks[2], "    return frac(number)\n")
    (layout.workdir / "solution.py").write_text(code)
    assert _verify(layout) == 1.0


def test_stale_reward_is_overwritten(tasks: list[Task], tmp_path: Path) -> None:
    layout = _materialize(tasks[0], tmp_path)
    layout.reward.parent.mkdir(parents=True)
    layout.reward.write_text("1.0\n")
    assert _verify(layout) == 0.0
