"""ares view: the page's data, its escaping, the CLI's errors, and --serve over real HTTP."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ares.cli.main import app
from ares.llm.types import LLMRequest, LLMResponse, Message
from ares.records import EpisodeRecord, ErrorRecord, JsonDirCollector, StepRecord
from ares.records.viewer import PageServer, embed_json, render_html, viewer_data
from interruptible import popen_interruptible

SYSTEM = "You are a coding agent. Run one ```bash``` block per reply; submit with `echo ARES_SUBMIT`."
HOSTILE = "</script><script>window.__pwned = 1</script><b>bold</b> & <!-- x"


def _cmd(cmd: str, exit_code: int, stdout: str = "", stderr: str = "", **kw: object) -> dict[str, object]:
    return {
        "cmd": cmd, "cwd": "/workspace", "exit_code": exit_code, "timed_out": False, "limit_hit": None,
        "duration_s": 0.042, "stdout": stdout, "stderr": stderr, **kw,
    }  # fmt: skip


def make_episode(
    episode_id: str,
    task: str,
    replies: list[tuple[str, dict[str, object]]],
    *,
    status: str = "finished",
    reward: float | None = 1.0,
    verifier: tuple[str, str] = ("", ""),
    start: float = 1_700_000_000.0,
    error: ErrorRecord | None = None,
) -> EpisodeRecord:
    """A realistic episode: system + task prompt, bash replies with traced commands, final reward."""
    history: list[Message] = [Message(role="user", content=f"Solve {task}: implement the function.")]
    steps = [
        StepRecord(0, "FIRST", LLMRequest(messages=tuple(history), system_prompt=SYSTEM), None, None, None,
                   start, start + 0.5)
    ]  # fmt: skip
    t = start + 0.5
    for i, (reply, command) in enumerate(replies, start=1):
        last = i == len(replies)
        action = LLMResponse(content=reply)
        history += [Message(role="assistant", content=reply)]
        if not last:
            feedback = f"exit code {command['exit_code']}\n{command['stdout']}"
            history += [Message(role="user", content=feedback)]
        trace = {
            "level": "full",
            "reward": {"reward": reward if last else 0.0, "discount": 0.0 if last else 1.0,
                       "terms": {"tests_passed": reward or 0.0} if last else {}},
            "env_state": {"commands": [command]},
            "extra": {},
        }  # fmt: skip
        obs = None if last else LLMRequest(messages=tuple(history), system_prompt=SYSTEM)
        steps.append(
            StepRecord(i, "LAST" if last else "MID", obs, action, reward if last else 0.0,
                       0.0 if last else 1.0, t, t + 1.0, trace=trace)
        )  # fmt: skip
        t += 1.0
    return EpisodeRecord(
        episode_id=episode_id, task_id=task, seed=0, env={"preset": "humaneval"}, started_at=start,
        ended_at=t, status=status, total_reward=reward, error=error, steps=tuple(steps),
        metadata={"episode": {"status": status, "reward": reward, "verifier_stdout": verifier[0],
                              "verifier_stderr": verifier[1], "limit_hits": []}},
    )  # fmt: skip


def sample_episodes() -> list[EpisodeRecord]:
    return [
        make_episode(
            "ep-pass", "HumanEval/0",
            [("Let me look.\n```bash\nls -la\n```", _cmd("ls -la", 0, "solution.py\ntest_solution.py\n")),
             ("Done.\n```bash\necho ARES_SUBMIT\n```", _cmd("echo ARES_SUBMIT", 0, "ARES_SUBMIT\n"))],
            verifier=("collected 3 items\n3 passed in 0.02s\n", ""), start=1_700_000_000.0,
        ),
        make_episode(
            "ep-hostile", "HumanEval/1",
            [(f"Printing {HOSTILE}\n```bash\ncat missing.txt\n```",
              _cmd("cat missing.txt", 1, "", f"cat: missing.txt: No such file {HOSTILE}")),
             ("```bash\necho ARES_SUBMIT\n```", _cmd("echo ARES_SUBMIT", 0, "ARES_SUBMIT\n"))],
            reward=0.0, verifier=("1 failed", "AssertionError: expected [1, 2] got None"),
            start=1_700_000_100.0,
        ),
        make_episode(
            "ep-limit", "swe/task-2",
            [("```bash\nsleep 100\n```", _cmd("sleep 100", 137, timed_out=True, limit_hit="timeout"))],
            status="truncated", reward=0.25, start=1_700_000_200.0,
        ),
        make_episode(
            "ep-error", "swe/task-3", [("```bash\ntrue\n```", _cmd("true", 0))], status="errored",
            reward=None, start=1_700_000_300.0,
            error=ErrorRecord("SandboxCrashedError", "the sandbox died", "Traceback ..."),
        ),
    ]  # fmt: skip


def write_records(directory: Path, episodes: list[EpisodeRecord] | None = None) -> Path:
    """Write episodes through the real collector, event by event, as a run would."""
    collector = JsonDirCollector(directory)
    for episode in episodes if episodes is not None else sample_episodes():
        collector.begin_episode(EpisodeRecord(**{**_fields(episode), "steps": (), "status": "running"}))
        for step in episode.steps:
            collector.record_step(episode.episode_id, step)
        collector.end_episode(
            episode.episode_id, status=episode.status, ended_at=episode.ended_at,
            total_reward=episode.total_reward, error=episode.error, metadata=dict(episode.metadata),
        )  # fmt: skip
    collector.close()
    return directory


def _fields(episode: EpisodeRecord) -> dict[str, object]:
    return {name: getattr(episode, name) for name in episode.__dataclass_fields__}


def embedded(page: str) -> dict[str, object]:
    match = re.search(r'<script type="application/json" id="ares-data">(.*?)</script>', page, re.S)
    assert match is not None
    return json.loads(match.group(1))


def test_conversation_is_flattened_once_per_message_with_commands_and_verifier() -> None:
    data = viewer_data(sample_episodes(), title="t")
    first = data["episodes"][0]
    summary = (first["task"], first["status"], first["reward"], first["steps"])
    assert summary == ("HumanEval/0", "finished", 1.0, 3)
    roles = [[m["role"] for m in turn["messages"]] for turn in first["turns"]]
    assert roles == [["system", "user"], ["user"], []]  # the echoed assistant message is not repeated
    assert first["turns"][1]["action"]["content"].startswith("Let me look.")
    assert first["turns"][1]["commands"][0]["stdout"] == "solution.py\ntest_solution.py\n"
    assert first["turns"][2]["reward_terms"] == {"tests_passed": 1.0}
    assert first["verifier"]["stdout"].endswith("3 passed in 0.02s\n")
    assert data["episodes"][3]["error"]["type"] == "SandboxCrashedError"


def test_hostile_text_cannot_close_the_data_script() -> None:
    page = render_html(sample_episodes(), title="<i>runs</i>")
    island = page.split('id="ares-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in island and ">" not in island
    assert "__pwned" not in page.replace(island, "")
    assert "<title>&lt;i&gt;runs&lt;/i&gt;</title>" in page
    assert HOSTILE in embedded(page)["episodes"][1]["turns"][1]["action"]["content"]
    assert json.loads(embed_json({"s": "\u2028</script>"})) == {"s": "\u2028</script>"}


def test_page_needs_no_network() -> None:
    page = render_html(sample_episodes())
    assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", page)
    assert "default-src 'none'" in page


def test_cli_writes_the_page_from_a_run_dir(tmp_path: Path) -> None:
    write_records(tmp_path / "run" / "trajectories")
    (tmp_path / "run" / "summary.json").write_text("{}")
    result = CliRunner().invoke(app, ["view", str(tmp_path / "run"), "--out", str(tmp_path / "v.html")])
    assert result.exit_code == 0, result.output
    assert "wrote 4 episodes" in result.output
    ids = [e["id"] for e in embedded((tmp_path / "v.html").read_text())["episodes"]]
    assert ids == ["ep-pass", "ep-hostile", "ep-limit", "ep-error"]
    default = CliRunner().invoke(app, ["view", str(tmp_path / "run")])
    assert default.exit_code == 0 and (tmp_path / "run" / "viewer.html").is_file()


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda d: None, "does not exist"),
        (lambda d: d.mkdir(), "no trajectory records"),
        (lambda d: (d.mkdir(), (d / "bad.json").write_text("{not json")), "cannot read the records"),
    ],
    ids=["missing", "empty", "corrupt"],
)
def test_cli_bad_input_is_a_clear_error(tmp_path: Path, setup: object, message: str) -> None:
    target = tmp_path / "records"
    setup(target)  # type: ignore[operator]
    result = CliRunner().invoke(app, ["view", str(target)])
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())


def test_page_server_renders_per_request_and_404s_elsewhere(tmp_path: Path) -> None:
    records = write_records(tmp_path / "records", sample_episodes()[:1])
    from ares.records import load_episodes

    with PageServer(lambda: render_html(load_episodes(records))) as server:
        with urllib.request.urlopen(server.url) as response:
            assert response.headers["Content-Type"] == "text/html; charset=utf-8"
            assert len(embedded(response.read().decode())["episodes"]) == 1
        write_records(records, sample_episodes()[1:2])  # a run still writing: a reload shows it
        with urllib.request.urlopen(server.url + "index.html") as response:
            assert len(embedded(response.read().decode())["episodes"]) == 2
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(server.url + "etc/passwd")
        assert caught.value.code == 404


def test_cli_serve_prints_the_url_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    records = write_records(tmp_path / "records")
    proc = popen_interruptible(
        [sys.executable, "-m", "ares.cli.main", "view", str(records), "--serve", "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/", line)
        assert url is not None, line + proc.stderr.read() if proc.stderr else line
        with urllib.request.urlopen(url.group(0)) as response:
            assert len(embedded(response.read().decode())["episodes"]) == 4
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0 and "stopped" in out
        assert not (records / "viewer.html").exists()  # --serve alone writes nothing
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_exit_reason_group_and_policy_cost_are_shown() -> None:
    episode = sample_episodes()[0]
    summary = {
        **episode.metadata["episode"], "exit_reason": "submitted", "policy_latency_s": 1.5,
        "prompt_tokens": 1200, "completion_tokens": 80, "cost_usd": 0.0021,
    }  # fmt: skip
    episode = EpisodeRecord(**{**_fields(episode), "metadata": {"episode": summary, "group_id": "g3"}})
    view = viewer_data([episode], title="t")["episodes"][0]
    assert (view["exit_reason"], view["group"]) == ("submitted", "g3")
    assert view["policy"] == {
        "policy_latency_s": 1.5, "prompt_tokens": 1200, "completion_tokens": 80, "cost_usd": 0.0021,
    }  # fmt: skip
    js = (Path(__import__("ares").records.viewer.__file__).parent / "assets" / "viewer.js").read_text()
    assert all(key in js for key in ("e.exit_reason", "e.group", "e.policy.prompt_tokens", "cost_usd"))
