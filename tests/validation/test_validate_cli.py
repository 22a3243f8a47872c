"""``ares tasks validate`` end to end: real episodes in real local sandboxes, through the CLI.

HumanEval, the Harbor fixtures and SWE fixture instances validate as good; a constructed Harbor set
names its broken, flaky and errored tasks with their reasons; ``--resume`` skips what was judged.

The flaky task is flaky on purpose and deterministically: its verifier asks a host-side counter
(a Unix socket in its tests dir, which the local backend binds into the verifier's sandbox) for the
reward, and the counter answers 1, 0, 1, ... — so two oracle runs always disagree, and the number of
connections shows how many oracle runs a resumed validation played.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ares.sandbox.local.images import local_builder

FIXTURES = Path(__file__).parents[1] / "fixtures"
SWE = FIXTURES / "swe"
SWE_CASES = "pytoolz__toolz-90001,pytoolz__toolz-90003"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ARES_IMAGE_FALLBACK": os.environ.get("ARES_IMAGE_FALLBACK", "offline")}
    command = [sys.executable, "-m", "ares.cli.main", "tasks", "validate", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)


def _report(out: Path) -> dict[str, Any]:
    return json.loads((out / "validation.json").read_text())


def _verdicts(out: Path) -> dict[str, str]:
    return {item["task_id"]: item["verdict"] for item in _report(out)["tasks"]}


def test_humaneval_tasks_are_good(tmp_path: Path) -> None:
    done = _cli("humaneval", "--tasks", "0:3", "--repeats", "2", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    report = _report(tmp_path)
    assert report["summary"] == {**report["summary"], "tasks": 3, "good": 3, "broken": 0, "flaky": 0}
    for item in report["tasks"]:
        assert item["oracle_rewards"] == [1.0, 1.0] and item["null_reward"] == 0.0, item
        assert item["statuses"] == {"oracle": ["finished", "finished"], "null": "finished"}
        assert item["errors"] == [] and item["seconds"] > 0 and len(item["run_seconds"]["oracle"]) == 2
    assert "3 tasks: good 3, broken 0, flaky 0, errored 0" in done.stdout
    # Progress counts each policy apart: the null runs (first) never mix into the oracle's pass rate.
    progress = [line for line in done.stdout.splitlines() if line.startswith("episodes ")]
    assert progress[-1].startswith("episodes 9/9  oracle 6/6 passed · null 0/3 passed  ["), progress
    assert all(" · null " in line and "mean reward" not in line for line in progress)


def test_harbor_fixtures_are_good_given_as_a_bare_path(tmp_path: Path) -> None:
    done = _cli(str(FIXTURES / "harbor"), "--out", str(tmp_path), "--concurrency", "2")
    assert done.returncode == 0, done.stderr[-2000:]
    report = _report(tmp_path)
    assert report["source"]["preset"] == "harbor"
    names = ["fix-bug", "hello-file", "json-reward", "pytest-app"]
    assert _verdicts(tmp_path) == dict.fromkeys(names, "good")


@pytest.fixture(scope="module")
def toolz_image() -> None:
    """The toolz project image the per-instance Dockerfiles start FROM (built once, then cached)."""
    asyncio.run(local_builder().build(SWE / "images" / "toolz", tags=("ares-swe/toolz:1.2.0",)))


def test_swe_instances_are_good(toolz_image: None, tmp_path: Path) -> None:
    pytest.importorskip("swebench", reason="needs ares[swe]")
    done = _cli(str(SWE / "instances.jsonl"), "--tasks", SWE_CASES, "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:] + done.stdout[-2000:]
    report = _report(tmp_path)
    assert report["source"]["preset"] == "swebench"
    assert _verdicts(tmp_path) == dict.fromkeys(SWE_CASES.split(","), "good")


# ---------------------------------------------------------------- a set with bad tasks

TASK_TOML = '[environment]\nworkdir = "/app"\n'
CHECK_ANSWER = """#!/usr/bin/env bash
mkdir -p /logs/verifier && echo 0 > /logs/verifier/reward.txt
if [ "$(cat answer.txt 2>/dev/null)" = 42 ]; then echo 1 > /logs/verifier/reward.txt; fi
"""
ALWAYS_ONE = "#!/usr/bin/env bash\nmkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt\n"
#: Reward 0 without the answer (the null run never asks the counter); with it, whatever the counter says.
ASK_COUNTER = """#!/usr/bin/env bash
mkdir -p /logs/verifier && echo 0 > /logs/verifier/reward.txt
[ "$(cat answer.txt 2>/dev/null)" = 42 ] || exit 0
python3 -c 'import socket
s = socket.socket(socket.AF_UNIX); s.connect("/tests/counter.sock"); print(s.recv(8).decode())' \
  > /logs/verifier/reward.txt
"""
SOLVE = "#!/usr/bin/env bash\necho {answer} > answer.txt\n"


def _task(root: Path, name: str, test: str, answer: str | None) -> Path:
    task = root / name
    (task / "tests").mkdir(parents=True)
    (task / "task.toml").write_text(TASK_TOML)
    (task / "instruction.md").write_text("Write 42 to answer.txt.\n")
    (task / "tests" / "test.sh").write_text(test)
    if answer is not None:
        (task / "solution").mkdir()
        (task / "solution" / "solve.sh").write_text(SOLVE.format(answer=answer))
    return task


class Counter:
    """A Unix socket server on the host that answers its n-th connection with ``n % 2``."""

    def __init__(self, path: Path) -> None:
        self.connections = 0
        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(str(path))
        path.chmod(0o777)
        self.server.listen()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return  # closed
            with conn:
                self.connections += 1
                conn.sendall(b"1" if self.connections % 2 else b"0")

    def close(self) -> None:
        self.server.shutdown(socket.SHUT_RDWR)
        self.server.close()
        self.thread.join(timeout=5)


@pytest.fixture
def bad_set(tmp_path: Path) -> Iterator[tuple[Path, Counter]]:
    """Five tasks: good, broken (a wrong oracle), broken (tests that pass anything), flaky, errored
    (no reference solution)."""
    root = tmp_path / "set"
    _task(root, "good", CHECK_ANSWER, "42")
    _task(root, "wrong-oracle", CHECK_ANSWER, "41")
    _task(root, "passes-anything", ALWAYS_ONE, "42")
    flaky = _task(root, "flaky", ASK_COUNTER, "42")
    _task(root, "no-solution", CHECK_ANSWER, None)
    counter = Counter(flaky / "tests" / "counter.sock")
    yield root, counter
    counter.close()


def test_broken_flaky_and_errored_tasks_are_named(bad_set: tuple[Path, Counter], tmp_path: Path) -> None:
    root, counter = bad_set
    out = tmp_path / "out"
    done = _cli("harbor", "--path", str(root), "--out", str(out), "--repeats", "3")
    assert done.returncode == 1, done.stderr[-2000:]
    assert _verdicts(out) == {
        "good": "good", "wrong-oracle": "broken", "passes-anything": "broken", "flaky": "flaky",
        "no-solution": "errored",
    }  # fmt: skip
    tasks = {item["task_id"]: item for item in _report(out)["tasks"]}
    assert tasks["wrong-oracle"]["reason"] == "oracle scores 0 (expected 1)"
    assert tasks["wrong-oracle"]["oracle_rewards"] == [0.0, 0.0, 0.0]
    assert tasks["passes-anything"]["reason"] == "null scores 1 (expected 0)"
    assert sorted(tasks["flaky"]["oracle_rewards"]) == [0.0, 1.0, 1.0] and counter.connections == 3
    assert tasks["flaky"]["reason"].startswith("oracle rewards differ across 3 runs: ")
    no_solution = "oracle run 1 errored: PolicyError: task no-solution has no"
    assert tasks["no-solution"]["reason"].startswith(no_solution)
    assert tasks["no-solution"]["errors"][0]["run"] == "oracle run 1"
    table = done.stdout[done.stdout.index("tasks not good") :]
    for name in ("wrong-oracle", "passes-anything", "flaky", "no-solution"):
        assert name in table
    assert "5 tasks: good 1, broken 2, flaky 1, errored 1" in done.stdout


def test_resume_skips_the_tasks_already_judged(bad_set: tuple[Path, Counter], tmp_path: Path) -> None:
    root, counter = bad_set
    out = tmp_path / "out"
    first = _cli("harbor", "--path", str(root), "--out", str(out), "--tasks", "flaky,good")
    assert first.returncode == 1 and counter.connections == 2, first.stderr[-2000:]
    before = {item["task_id"]: item for item in _report(out)["tasks"]}

    again = _cli("harbor", "--path", str(root), "--out", str(out), "--resume")
    assert again.returncode == 1, again.stderr[-2000:]
    assert "2 of 5 tasks already judged" in again.stdout
    assert counter.connections == 2  # the flaky task's oracle did not run again
    after = {item["task_id"]: item for item in _report(out)["tasks"]}
    assert {k: after[k] for k in before} == before  # kept as judged, times included
    assert set(after) == {"flaky", "good", "wrong-oracle", "passes-anything", "no-solution"}

    third = _cli("harbor", "--path", str(root), "--out", str(out), "--resume")
    assert "4 of 5 tasks already judged" in third.stdout  # the errored task runs again
    assert _verdicts(out)["no-solution"] == "errored" and counter.connections == 2


# ---------------------------------------------------------------- mistakes exit 2


def test_mistakes_are_one_line_errors(tmp_path: Path) -> None:
    cases = {
        ("no-such-preset-or-path",): "is neither a preset",
        (str(FIXTURES / "harbor"), "--path", str(FIXTURES / "harbor")): "give the tasks once",
        ("harbor",): "needs a dataset: --path DIR or --dataset",
        ("humaneval", "--repeats", "0"): "--repeats",
        ("humaneval", "--resume"): "--resume needs --out",
        ("humaneval", "--split", "test"): "--split applies to",
    }
    for args, message in cases.items():
        done = _cli(*args)
        assert done.returncode == 2 and message in done.stderr, (args, done.stderr)
        assert done.stderr.count("\n") == 1, done.stderr


def test_a_report_is_never_overwritten_or_resumed_for_another_source(tmp_path: Path) -> None:
    assert _cli("humaneval", "--tasks", "0", "--out", str(tmp_path)).returncode == 0
    exists = _cli("humaneval", "--tasks", "0", "--out", str(tmp_path))
    assert exists.returncode == 2 and "exists: add --resume" in exists.stderr
    other = _cli(str(FIXTURES / "harbor"), "--out", str(tmp_path), "--resume")
    assert other.returncode == 2 and "cannot resume" in other.stderr and "preset=humaneval" in other.stderr
