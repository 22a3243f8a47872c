"""`ares run --out` records trajectories; Ctrl-C leaves valid files; `--resume` finishes the run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ares.records import load_episodes
from interruptible import popen_interruptible


def ares(*args: str) -> list[str]:
    return [sys.executable, "-m", "ares.cli.main", *args]


def write_script(path: Path, seconds: float) -> Path:
    lines = [{"content": f"```bash\nsleep {seconds}\n```"}, {"content": "```bash\necho ARES_SUBMIT\n```"}]
    path.write_text("\n".join(json.dumps(x) for x in lines))
    return path


def test_ctrl_c_leaves_complete_records_and_resume_finishes(tmp_path: Path) -> None:
    out = tmp_path / "run"
    script = write_script(tmp_path / "slow.jsonl", 1.5)
    args = ["run", "humaneval", "--tasks", "0:6", "-c", "2", "-p", "scripted", "--script", str(script)]
    proc = popen_interruptible(ares(*args, "--out", str(out)), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # wait until two episodes are done and two more are running
        done = list((out / "episodes").glob("*.json")) if (out / "episodes").exists() else []
        if len(done) >= 2 and len(list((out / "trajectories").glob("*.json"))) >= 4:
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)

    episodes = load_episodes(out / "trajectories")
    statuses = sorted(e.status for e in episodes)
    assert "finished" in statuses and "cancelled" in statuses, statuses
    for episode in episodes:
        assert episode.ended_at is not None  # every episode, even a cut one, was closed properly
        if episode.status == "cancelled":
            assert episode.steps[0].step_type == "FIRST"
    assert not [p for p in (out / "trajectories").iterdir() if p.name.startswith(".")]
    finished_before = {p.name for p in (out / "episodes").glob("*.json")}

    resumed = subprocess.run(
        ares(*args, "--out", str(out), "--resume"), capture_output=True, text=True, timeout=300
    )
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes"] == 6 and summary["statuses"] == {"finished": 6}
    after = {p.name for p in (out / "episodes").glob("*.json")}
    assert finished_before < after and len(after) == 6
    runs = [e for e in load_episodes(out / "trajectories") if e.status == "finished"]
    assert len(runs) == 6  # finished episodes were not run twice
    # the cancelled trajectories of the re-run episodes are superseded: one trajectory per episode
    assert len(load_episodes(out / "trajectories")) == 6
    assert len(load_episodes(out / "trajectories", keep_superseded=True)) >= 6
    exported = subprocess.run(ares("export", str(out)), capture_output=True, text=True, timeout=120)
    assert exported.returncode == 0 and "6/6 episodes -> 6 conversations" in exported.stdout, exported


def test_resume_reruns_errored_episodes(tmp_path: Path) -> None:
    out = tmp_path / "run"
    first = subprocess.run(ares("run", "humaneval", "--tasks", "0:2", "--out", str(out)), capture_output=True)
    assert first.returncode == 0
    (path,) = [p for p in (out / "episodes").glob("00001-*.json")]
    data = json.loads(path.read_text())
    data["status"], data["reward"] = "errored", 0.0
    path.write_text(json.dumps(data))
    env = {**os.environ, "COLUMNS": "200"}
    again = subprocess.run(
        ares("run", "humaneval", "--tasks", "0:2", "--out", str(out), "--resume"),
        capture_output=True,
        env=env,
    )
    assert again.returncode == 0
    assert json.loads(path.read_text())["status"] == "finished"
    assert json.loads((out / "summary.json").read_text())["mean_reward"] == 1.0
    assert len(load_episodes(out / "trajectories")) == 3  # two first-run episodes + the re-run
