"""Ctrl-C (or SIGTERM) during ``ares run``: exit 130 (143), one line with what was kept and the
command that continues, a partial summary.json marked interrupted, no sandbox left behind; the
printed command finishes the run without playing the kept episodes again."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from ares.cli.interrupt import resume_command
from ares.records import load_episodes
from interruptible import popen_interruptible

ARES = [sys.executable, "-m", "ares.cli.main"]
RUN = ["run", "humaneval", "--policy", "oracle", "-n", "20", "-c", "1"]
LINE = re.compile(r"interrupted: kept (\d+) of 20 episodes in (.+); continue with: (.+)")


def _episode_files(out: Path) -> dict[str, int]:
    """Each episode file with its modification time (a re-played episode would rewrite it)."""
    folder = out / "episodes"
    return {p.name: p.stat().st_mtime_ns for p in folder.glob("*.json")} if folder.is_dir() else {}


def _interrupt(out: Path, state: Path, sig: signal.Signals) -> subprocess.CompletedProcess[str]:
    """Run RUN into ``out`` and send ``sig`` once an episode is on disk."""
    env = {**os.environ, "ARES_SANDBOX_DIR": str(state)}
    args = [*ARES, *RUN, "--out", str(out)]
    proc = popen_interruptible(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 120
    while not _episode_files(out) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(args, proc.returncode, stdout, stderr)


def _check_interrupted(done: subprocess.CompletedProcess[str], out: Path, state: Path) -> int:
    """The one line, the partial summary and a clean sandbox dir; how many episodes were kept."""
    (line,) = done.stderr.strip().splitlines()
    match = LINE.fullmatch(line)
    assert match is not None, line
    kept, where, command = int(match[1]), match[2], match[3]
    files = _episode_files(out)
    assert kept == len(files) >= 1 and where == str(out / "episodes")
    assert command == shlex.join(["ares", *RUN, "--out", str(out), "--resume"])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["planned_episodes"] == 20
    assert summary["episodes"] == kept and summary["statuses"] == {"finished": kept}
    assert "Traceback" not in done.stdout + done.stderr
    assert list(state.iterdir()) == []  # every sandbox stopped and removed
    return kept


def test_ctrl_c_keeps_the_finished_episodes_and_the_printed_command_resumes(tmp_path: Path) -> None:
    out, state = tmp_path / "run", tmp_path / "state"
    state.mkdir(mode=0o700)
    done = _interrupt(out, state, signal.SIGINT)
    assert done.returncode == 130, done.stderr
    kept = _check_interrupted(done, out, state)
    before = _episode_files(out)
    command = shlex.split(LINE.fullmatch(done.stderr.strip())[3])  # type: ignore[index]
    assert command[0] == "ares"

    resumed = subprocess.run([*ARES, *command[1:]], capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert f"running 20 episodes ({kept} done before)" in resumed.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] is False and summary["episodes"] == 20
    after = _episode_files(out)
    assert len(after) == 20 and {name: after[name] for name in before} == before  # kept: not re-played
    finished = [e for e in load_episodes(out / "trajectories") if e.status == "finished"]
    assert len(finished) == 20
    viewed = subprocess.run([*ARES, "view", str(out)], capture_output=True, text=True, timeout=120)
    assert viewed.returncode == 0, viewed.stderr


def test_sigterm_ends_the_run_the_same_way_with_exit_143(tmp_path: Path) -> None:
    out, state = tmp_path / "run", tmp_path / "state"
    state.mkdir(mode=0o700)
    done = _interrupt(out, state, signal.SIGTERM)
    assert done.returncode == 143, done.stderr
    _check_interrupted(done, out, state)


def test_the_resume_command_adds_what_the_run_lacked() -> None:
    out = Path("runs/humaneval-oracle-20260101-000000")
    assert resume_command(["run", "humaneval", "--tasks", "0:3"], out, out_given=False) == (
        "ares run humaneval --tasks 0:3 --out runs/humaneval-oracle-20260101-000000 --resume"
    )
    given = ["run", "harbor", "--path", "my tasks", "--out", "o", "--resume"]
    assert (
        resume_command(given, Path("o"), out_given=True)
        == "ares run harbor --path 'my tasks' --out o --resume"
    )
