"""The `ares` command as a user runs it: a real subprocess of the installed entry point."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def ares(*args: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("ares", path=str(Path(sys.executable).parent))
    cmd = [exe] if exe else [sys.executable, "-m", "ares.cli.main"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=300)


def test_presets_lists_humaneval_and_harbor() -> None:
    result = ares("presets")
    assert result.returncode == 0
    assert "humaneval" in result.stdout and "harbor" in result.stdout


def test_run_writes_results_and_summary(tmp_path: Path) -> None:
    result = ares(
        "run", "humaneval", "--policy", "oracle", "--tasks", "0:4", "-c", "2", "--out", str(tmp_path)
    )
    assert result.returncode == 0, result.stderr
    for label in ("mean reward", "pass rate", "p50 step latency", "wall time", "statuses"):
        assert label in result.stdout
    episodes = sorted((tmp_path / "episodes").glob("*.json"))
    assert [json.loads(p.read_text())["task_id"] for p in episodes] == [f"humaneval_{i}" for i in range(4)]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["episodes"] == 4 and summary["pass_rate"] == 1.0 and summary["statuses"] == {"finished": 4}


def verifier_modes(out: Path) -> list[str]:
    return [json.loads(p.read_text())["verifier_mode"] for p in (out / "episodes").glob("*.json")]


def test_a_warm_pool_run_verifies_in_forks_and_in_place_only_when_asked(tmp_path: Path) -> None:
    """`ares run humaneval --warm-pool 2` once verified in the agent's own sandbox on Python 3.12+."""
    pooled = ares("run", "humaneval", "--tasks", "0:2", "--warm-pool", "2", "--out", str(tmp_path / "pool"))
    assert pooled.returncode == 0, pooled.stderr
    assert verifier_modes(tmp_path / "pool") == ["outputs"] * 2
    asked = ares(
        "run", "humaneval", "--tasks", "0", "--verifier-mode", "in-place", "--out", str(tmp_path / "ip")
    )
    assert asked.returncode == 0, asked.stderr
    assert verifier_modes(tmp_path / "ip") == ["in-place"]


def test_null_policy_on_harbor_fixture(tmp_path: Path) -> None:
    result = ares("run", "harbor", "--path", str(FIXTURES / "harbor"), "-p", "null", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["episodes"] == 4 and summary["mean_reward"] == 0.0


def test_scripted_policy_from_jsonl(tmp_path: Path) -> None:
    script = tmp_path / "script.jsonl"
    lines = [
        {"content": "```bash\necho hello > /workspace/out.txt\n```"},
        {"content": "```bash\necho ARES_SUBMIT\n```"},
    ]
    script.write_text("\n".join(json.dumps(x) for x in lines))
    result = ares(
        "run",
        "humaneval",
        "-p",
        "scripted",
        "--script",
        str(script),
        "--tasks",
        "0",
        "--out",
        str(tmp_path / "o"),
    )
    assert result.returncode == 0, result.stderr
    record = json.loads(next((tmp_path / "o" / "episodes").glob("*.json")).read_text())
    assert record["steps"] == 2 and record["status"] == "finished" and record["reward"] == 0.0


def test_unknown_preset_policy_and_broken_dir_exit_2_with_one_line(tmp_path: Path) -> None:
    for args in (
        ["run", "nope"],
        ["run", "humaneval", "-p", "nope"],
        ["run", "harbor", "--path", str(FIXTURES / "harbor_broken" / "bad-toml")],
    ):
        result = ares(*args)
        assert result.returncode == 2
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert result.stderr.startswith("error:")


class _FakeOpenAI(BaseHTTPRequestHandler):
    """A loopback OpenAI-compatible endpoint whose model always submits."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        assert body["messages"][0]["role"] == "system"
        content = "Done.\n```bash\necho ARES_SUBMIT\n```"
        reply = {
            "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }  # fmt: skip
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def test_openai_policy_against_a_loopback_server(tmp_path: Path) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeOpenAI)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        args = ["run", "humaneval", "-p", "openai", "--base-url", url, "--model", "m", "--tasks", "0:2"]
        result = ares(*args, "--out", str(tmp_path))
    finally:
        server.shutdown()
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["statuses"] == {"finished": 2} and summary["mean_reward"] == 0.0


def test_unknown_sandbox_backend_is_a_one_line_error() -> None:
    result = ares("run", "humaneval", "--tasks", "0", "--sandbox", "vmware")
    assert result.returncode == 2
    assert "unknown sandbox backend 'vmware'" in result.stderr and "local, docker" in result.stderr
    assert "Traceback" not in result.stderr
