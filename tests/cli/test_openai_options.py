"""``ares run --policy openai`` options reach the server: --max-tokens, --temperature, --timeout and
--api-key-env (the client replaces what the agent asked for)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from ares.errors import LLMError
from ares.llm.openai_client import OpenAIChatClient
from ares.llm.types import LLMRequest, SamplingParams, user
from oracle_openai import send_json


class _Server(ThreadingHTTPServer):
    received: list[dict[str, Any]]
    delay_s: float


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.received.append({"body": body, "authorization": self.headers.get("Authorization")})
        time.sleep(self.server.delay_s)
        reply = {
            "id": "c1", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "```bash\necho ARES_SUBMIT\n```"}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }  # fmt: skip
        send_json(self, reply)  # a client that gave up (the timeout test) is no error

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[_Server]:
    srv = _Server(("127.0.0.1", 0), _Handler)
    srv.received, srv.delay_s = [], 0.0
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()


def ares(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("ares", path=str(Path(sys.executable).parent))
    cmd = [exe] if exe else [sys.executable, "-m", "ares.cli.main"]
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=300, env={**clean, **env})


def test_sampling_options_and_key_variable_reach_the_server(server: _Server, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    result = ares(
        "run", "humaneval", "-p", "openai", "--base-url", url, "--model", "m", "--tasks", "0",
        "--max-tokens", "77", "--temperature", "0.25", "--timeout", "30", "--api-key-env", "MY_LLM_KEY",
        "--out", str(tmp_path), env={"MY_LLM_KEY": "sk-from-my-var", "OPENAI_API_KEY": "sk-not-this-one"},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    (request,) = server.received
    assert request["authorization"] == "Bearer sk-from-my-var"
    assert request["body"]["max_tokens"] == 77 and request["body"]["temperature"] == 0.25
    assert request["body"]["model"] == "m"
    assert "10 prompt, 5 completion" in result.stdout  # the run's token totals


def test_timeout_ends_the_episode_errored_with_the_reason(server: _Server, tmp_path: Path) -> None:
    server.delay_s = 2.0
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    result = ares(
        "run", "humaneval", "-p", "openai", "--base-url", url, "--model", "m", "--tasks", "0",
        "--timeout", "0.3", "--out", str(tmp_path), env={},
    )  # fmt: skip
    assert result.returncode == 1
    assert "timed out after 0.3s" in result.stdout and "raise --timeout" in result.stdout


def test_client_options_replace_the_agents_sampling() -> None:
    client = OpenAIChatClient(base_url="http://x/v1", model="m", max_tokens=5, temperature=0.0)
    request = LLMRequest(messages=(user("hi"),), sampling=SamplingParams(temperature=1.0, max_tokens=4096))
    body = client.request_body(request)
    assert body["max_tokens"] == 5 and body["temperature"] == 0.0
    agent_only = OpenAIChatClient(base_url="http://x/v1", model="m").request_body(request)
    assert agent_only["max_tokens"] == 4096 and agent_only["temperature"] == 1.0
    with pytest.raises(LLMError, match="max_tokens"):
        OpenAIChatClient(base_url="http://x/v1", max_tokens=0)


def test_api_key_env_names_the_variable() -> None:
    env = {"TEAM_KEY": "k1", "OPENAI_API_KEY": "k2", "OPENAI_MODEL": "m"}
    assert OpenAIChatClient.from_env(api_key_env="TEAM_KEY", env=env)._api_key == "k1"
    assert OpenAIChatClient.from_env(env=env)._api_key == "k2"
    with pytest.raises(LLMError, match="TEAM_KEY is not set"):
        OpenAIChatClient.from_env(api_key_env="TEAM_KEY", env={"OPENAI_MODEL": "m"})
