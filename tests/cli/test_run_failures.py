"""After a run, failures are visible: grouped errors, failed and errored tasks, a non-zero exit; while
it runs, progress shows up even when output is not a terminal."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from ares.cli.progress import LiveProgress, PlainProgress, _Tally
from ares.core.status import EpisodeStatus
from ares.images.progress import BuildEvent, PullEvent
from ares.rollout.results import EpisodeResult

UNREACHABLE = "http://127.0.0.1:9/v1"  # the discard port: nothing listens there


def ares(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("ares", path=str(Path(sys.executable).parent))
    cmd = [exe] if exe else [sys.executable, "-m", "ares.cli.main"]
    return subprocess.run(
        [*cmd, *args], capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})}
    )


def test_unreachable_llm_server_prints_the_grouped_error_and_exits_1(tmp_path: Path) -> None:
    args = ["run", "humaneval", "--policy", "openai", "--base-url", UNREACHABLE, "--model", "x"]
    result = ares(*args, "--tasks", "0:3", "--out", str(tmp_path), env={"OPENAI_API_KEY": "dummy"})
    assert result.returncode == 1, result.stderr
    out = result.stdout
    # The start-up check warns (the server may still be coming up), in one line.
    assert result.stderr.strip().splitlines() == [
        f"warning: nothing answers at 127.0.0.1:9 (Connection refused) for --base-url {UNREACHABLE}; "
        "episodes will error until the server is up"
    ]
    assert "3 (0 scored, 3 errored)" in out and "errored=3" in out
    assert "errors (3 episodes, 1 distinct):" in out
    assert f"3x LLMError: could not reach {UNREACHABLE}/chat/completions (4 attempt(s))" in out
    assert "e.g. episode 0 (humaneval_0)" in out
    assert "errored tasks (3): humaneval_0, humaneval_1, humaneval_2" in out
    assert "Traceback" not in out + result.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["errored"] == 3 and summary["errors"][0]["count"] == 3
    assert summary["errors"][0]["type"] == "LLMError" and summary["errored_task_ids"] == [
        "humaneval_0",
        "humaneval_1",
        "humaneval_2",
    ]
    episode = json.loads(next((tmp_path / "episodes").glob("00000-*.json")).read_text())
    assert episode["status"] == "errored" and "could not reach" in episode["error"]["message"]


def test_allow_errors_keeps_exit_0_and_still_reports(tmp_path: Path) -> None:
    args = [
        "run",
        "humaneval",
        "--policy",
        "openai",
        "--base-url",
        UNREACHABLE,
        "--model",
        "x",
        "--tasks",
        "0",
    ]
    result = ares(*args, "--allow-errors", "--out", str(tmp_path), env={"OPENAI_API_KEY": "dummy"})
    assert result.returncode == 0, result.stderr
    assert "1x LLMError" in result.stdout and "errored tasks (1): humaneval_0" in result.stdout


def test_failed_tasks_are_named_and_redirected_output_shows_progress(tmp_path: Path) -> None:
    result = ares("run", "humaneval", "-p", "null", "--tasks", "0:3", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr  # failing tests are rewards, not errors
    lines = result.stdout.splitlines()
    assert lines[0] == "running 3 episodes"
    progress = [line for line in lines if line.startswith("episodes ")]
    assert progress and progress[-1].startswith("episodes 3/3  pass 0/3  mean reward 0.000")
    assert "failed tasks (3): humaneval_0, humaneval_1, humaneval_2" in result.stdout
    assert "errors" not in result.stdout and "errored tasks" not in result.stdout
    # The progress lines come before the summary, i.e. while the run went on.
    assert lines.index(progress[-1]) < next(i for i, line in enumerate(lines) if "ARES run summary" in line)


def test_groups_are_reported(tmp_path: Path) -> None:
    result = ares(
        "run", "humaneval", "-p", "oracle", "--tasks", "0:2", "--group-size", "2", "--out", str(tmp_path)
    )
    assert result.returncode == 0, result.stderr
    assert "2 of 2" in result.stdout  # the groups row: 2 groups of 2
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [(g["task_id"], g["size"], g["pass_rate"]) for g in summary["groups"]] == [
        ("humaneval_0", 2, 1.0),
        ("humaneval_1", 2, 1.0),
    ]


# ---------------------------------------------------------------- the progress displays, in-process


def _result(index: int, *, error: str | None = None, reward: float = 1.0) -> EpisodeResult:
    status = EpisodeStatus.ERRORED if error else EpisodeStatus.FINISHED
    return EpisodeResult(
        index=index, task_id=f"t{index}", status=status, reward=None if error else reward, steps=1,
        duration_s=0.1, step_latencies_s=(), error={"type": "LLMError", "message": error} if error else None,
    )  # fmt: skip


BUILD = [
    BuildEvent("task-environment", None, 0, 3, "building"),
    BuildEvent("task-environment", "FROM python:3.11-slim", 1, 3, "cached"),
    BuildEvent("task-environment", "RUN pip install pytest", 2, 3, "building"),
    BuildEvent("task-environment", "RUN pip install pytest", 2, 3, "done", 61.2),
    BuildEvent("task-environment", "COPY src/ /app/", 3, 3, "building"),
    BuildEvent("task-environment", "COPY src/ /app/", 3, 3, "failed", 0.5),
    BuildEvent("task-environment", None, 2, 3, "failed", 62.0, built=1, cached=1),
    BuildEvent("other-env", None, 3, 3, "cached", 0.01, cached=3),
]


def test_plain_progress_prints_builds_errors_and_counts() -> None:
    from rich.console import Console

    console = Console(file=__import__("io").StringIO(), width=80)
    with PlainProgress(console, _Tally(4, ())) as progress:
        for event in BUILD:
            progress.on_build(event)
        progress.on_result(_result(0))
        progress.on_result(_result(1, error="could not reach the server\nsecond line"))
        progress.on_result(_result(2, error="could not reach the server\nother second line"))
        progress.on_result(_result(3, reward=0.0))
    lines = console.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert lines == [
        "running 4 episodes",
        "image task-environment step 2/3 RUN pip install pytest: building",
        "image task-environment step 2/3 RUN pip install pytest: done in 61.2s",
        "image task-environment step 3/3 COPY src/ /app/: building",
        "image task-environment step 3/3 COPY src/ /app/: FAILED in 0.5s",
        "image task-environment: FAILED in 62.0s (1 cached, 1 built)",
        "image other-env: ready in 0.0s (3 cached, 0 built)",
        lines[7],
        "episode 1 (t1) errored: LLMError: could not reach the server",  # announced once per cause
        lines[9],
        lines[10],
        lines[11],
    ]
    assert lines[7].startswith("episodes 1/4  pass 1/1  mean reward 1.000")
    assert lines[11].startswith("episodes 4/4  pass 1/2  mean reward 0.500  errored 2")


def test_labelled_progress_counts_each_label_apart() -> None:
    from rich.console import Console

    console = Console(file=__import__("io").StringIO(), width=120)
    with PlainProgress(console, _Tally(4, (), labels=("oracle", "null"))) as progress:
        progress.on_result(_result(0, reward=0.0), "null")
        progress.on_result(_result(1), "oracle")
        progress.on_result(_result(2, error="boom"), "oracle")
        progress.on_result(_result(3), "null")
    last = console.file.getvalue().splitlines()[-1]  # type: ignore[attr-defined]
    assert last.startswith("episodes 4/4  oracle 1/2 passed (1 errored) · null 1/2 passed  [")


def test_live_progress_shows_and_removes_build_rows() -> None:
    from rich.console import Console

    console = Console(file=__import__("io").StringIO(), force_terminal=True, width=120)
    with LiveProgress(console, _Tally(2, ())) as progress:
        progress.on_build(BUILD[0])
        progress.on_build(BUILD[2])
        (row,) = progress._builds.values()
        assert progress.progress.tasks[row].description == "task: RUN pip install pytest"
        assert progress.progress.tasks[row].completed == 1
        for event in BUILD[3:]:
            progress.on_build(event)
        assert progress._builds == {}
        progress.on_result(_result(0))
        progress.on_result(_result(1, error="boom [docker]"))
    text = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", console.file.getvalue())  # type: ignore[attr-defined]
    assert "image task-environment: FAILED in 62.0s" in text and "other-env" not in text  # cached: not news
    assert "episode 1 (t1) errored: LLMError: boom [docker]" in text  # markup escaped


def test_plain_progress_says_when_a_step_it_waited_for_came_from_the_cache() -> None:
    from rich.console import Console

    console = Console(file=__import__("io").StringIO(), width=80)
    waited = [
        BuildEvent("b-environment", "RUN pip install pytest", 2, 3, "building"),  # another task builds it
        BuildEvent("b-environment", "RUN pip install pytest", 2, 3, "cached"),
        BuildEvent("b-environment", "COPY . /app", 3, 3, "cached"),  # never waited for: not said
    ]
    with PlainProgress(console, _Tally(1, ())) as progress:
        for event in waited:
            progress.on_build(event)
    assert console.file.getvalue().splitlines()[1:] == [  # type: ignore[attr-defined]
        "image b-environment step 2/3 RUN pip install pytest: building",
        "image b-environment step 2/3 RUN pip install pytest: cached",
    ]


MB = 1_000_000
PULL = [
    PullEvent("reg:5000/app:1", None, "resolving"),
    PullEvent("reg:5000/app:1", "sha256:" + "a" * 64, "downloading", 5 * MB, 20 * MB),
    PullEvent("reg:5000/app:1", "sha256:" + "b" * 64, "downloading", 1 * MB, 2 * MB),
    PullEvent("reg:5000/app:1", "sha256:" + "b" * 64, "done", 2 * MB, 2 * MB),
    PullEvent("reg:5000/app:1", "sha256:" + "a" * 64, "done", 20 * MB, 20 * MB),
    PullEvent("reg:5000/app:1", None, "done", 22 * MB, 22 * MB, layers=2, downloaded=2, elapsed_s=3.2),
    PullEvent("reg:5000/base:2", None, "resolving"),
    PullEvent("reg:5000/base:2", None, "cached", 0, 0, layers=3, downloaded=0, elapsed_s=0.01),
]


def test_plain_progress_prints_finished_layers_and_pulled_images() -> None:
    from rich.console import Console

    console = Console(file=__import__("io").StringIO(), width=120)
    with PlainProgress(console, _Tally(1, ())) as progress:
        for event in PULL:
            progress.on_build(event)
    lines = console.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert lines == [
        "running 1 episodes",
        "image reg:5000/app:1 layer bbbbbbbbbbbb: done 2.0/2.0 MB",
        "image reg:5000/app:1 layer aaaaaaaaaaaa: done 20.0/20.0 MB",
        "image reg:5000/app:1: pulled in 3.2s (2 layers, 2 downloaded, 22.0 MB moved)",
    ]  # an image already in the store is not news


def test_live_progress_shows_one_row_per_pull_with_bytes_and_layers() -> None:
    from rich.console import Console

    console = Console(file=__import__("io").StringIO(), force_terminal=True, width=120)
    with LiveProgress(console, _Tally(1, ())) as progress:
        for event in PULL[:3]:
            progress.on_build(event)
        (row,) = progress._builds.values()
        task = progress.progress.tasks[row]
        assert (task.completed, task.total) == (6 * MB, 22 * MB)
        assert task.description == "reg:5000/app:1: 0/2 layers"
        for event in PULL[3:5]:
            progress.on_build(event)
        assert progress.progress.tasks[row].description == "reg:5000/app:1: 2/2 layers"
        for event in PULL[5:]:
            progress.on_build(event)
        assert progress._builds == {}  # finished pulls leave no row behind
    text = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", console.file.getvalue())  # type: ignore[attr-defined]
    assert "image reg:5000/app:1: pulled in 3.2s (2 layers, 2 downloaded, 22.0 MB moved)" in text
    assert "image reg:5000/base:2" not in text  # up to date: a row while resolving, no line after
