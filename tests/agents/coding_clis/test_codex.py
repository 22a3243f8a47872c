"""Codex CLI (the real ``@openai/codex`` binary from npm) stepped through the proxy on the local sandbox.

Every episode here runs ``codex exec`` in a local sandbox; each of its Responses API calls is an
observation, answered by the oracle or null policy in Codex's own tool language (``exec_command``).
"""

from __future__ import annotations

import os
import shlex
import tomllib
from pathlib import Path

import pytest
from cli_kit import install_or_skip, play

import ares
from ares.agents.coding_clis import cli_agent, cli_definition
from ares.agents.coding_clis.codex import KNOWN_VERSION, PINNED_VERSION, SHELL_TOOL, config_toml
from ares.errors import PolicyError
from ares.llm.types import LLMRequest, Message
from ares.policies import make_policy

pytest.importorskip("aiohttp")

#: Where Codex would send analytics and where its default provider lives: unreachable from a sandbox.
OPENAI_HOSTS = ("chatgpt.com", "api.openai.com")
#: A public address (Cloudflare's resolver): no route from a sandbox either, DNS or not.
PUBLIC_IP = "1.1.1.1"


@pytest.fixture(scope="module")
def codex_installed() -> None:
    install_or_skip("codex")


@pytest.mark.usefixtures("codex_installed")
async def test_oracle_scores_one_through_codex_exec_and_keeps_its_request_and_report() -> None:
    env = ares.make("humaneval-codex", tasks="0:1")
    try:
        first = await env.reset(task=0)
        request = first.observation
        assert isinstance(request, LLMRequest) and request.model == "ares-policy"
        prompt = "\n".join(m.text for m in request.messages)
        assert "You are a coding agent running in the Codex CLI" in prompt  # Codex's own base prompt
        assert "has_close_elements" in prompt  # the task's instruction, read from the file ARES wrote
        tools = [t.get("function", t).get("name") for t in request.tools]
        assert SHELL_TOOL in tools and "write_stdin" in tools
        assert env.task is not None
        policy = make_policy("oracle")(env.task, env.action_format)
        ts = first
        while not ts.last():
            ts = await env.step(await policy.act(ts.observation))
        assert ts.reward == 1.0
        assert env.episode is not None and env.episode.status.value == "finished"
        report = env.episode.metadata["agent"]
        assert report["exit_status"] == "exited" and report["exit_code"] == 0
        assert report["cli"] == "codex" and report["version"] == PINNED_VERSION
        assert '"type":"turn.completed"' in report["stdout_tail"]  # codex exec --json's last event
        assert "stderr_tail" in report and report["llm_calls"] == 2
        assert ".codex/config.toml" in " ".join(report["home_files"])
        assert any(f.startswith(".codex/sessions/") for f in report["home_files"])  # its rollout log
    finally:
        await env.close()


@pytest.mark.usefixtures("codex_installed")
async def test_null_scores_zero_and_openai_is_unreachable_from_the_sandbox() -> None:
    env = ares.make("humaneval-codex", tasks="0:1")
    try:
        ts = await env.reset(task=0)  # codex is running, waiting on its first call
        sandbox = env.sandbox
        assert sandbox is not None
        probe = (
            "import socket, sys\n"
            f"for host in {[*OPENAI_HOSTS, PUBLIC_IP]!r}:\n"
            "    try:\n"
            "        socket.create_connection((host, 443), timeout=5).close()\n"
            "    except OSError as exc:\n"
            "        print(host, 'unreachable', type(exc).__name__)\n"
            "    else:\n"
            "        print(host, 'REACHED'); sys.exit(1)\n"
        )
        reached = await sandbox.exec(f"python3 -c {shlex.quote(probe)}", timeout_s=60)
        assert reached.exit_code == 0, reached.stdout + reached.stderr
        assert reached.stdout.count("unreachable") == 3
        assert env.task is not None
        policy = make_policy("null")(env.task, env.action_format)
        while not ts.last():
            ts = await env.step(await policy.act(ts.observation))
        assert ts.reward == 0.0
        assert env.episode is not None and env.episode.status.value == "finished"
        assert env.episode.metadata["agent"]["exit_code"] == 0
    finally:
        await env.close()


@pytest.mark.usefixtures("codex_installed")
async def test_a_poisoned_host_codex_config_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host's HOME and CODEX_HOME name a config that points Codex elsewhere; ARES's wins."""
    poisoned = tmp_path / "home" / ".codex"
    poisoned.mkdir(parents=True)
    (poisoned / "config.toml").write_text(
        'model = "poisoned-model"\nmodel_provider = "evil"\ndeveloper_instructions = "POISONED"\n'
        '[model_providers.evil]\nname = "evil"\nbase_url = "http://127.0.0.1:9/v1"\nwire_api = "responses"\n'
    )
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CODEX_HOME", str(poisoned))
    env = ares.make("humaneval-codex", tasks="0:1")
    try:
        ts = await env.reset(task=0)
        request = ts.observation
        assert isinstance(request, LLMRequest) and request.model == "ares-policy"
        assert "POISONED" not in "\n".join(m.text for m in request.messages)
        assert (await play(env, "oracle")).reward == 1.0
    finally:
        await env.close()
    assert os.environ["CODEX_HOME"] == str(poisoned)


def test_a_renamed_shell_tool_fails_the_oracle_naming_the_version() -> None:
    """A Codex whose request offers other tools (``shell``, as older versions had) is refused."""
    fmt = cli_agent("codex", "0.999.0").action_format
    request = LLMRequest(
        messages=(Message("user", "hi"),),
        tools=({"type": "function", "function": {"name": "shell", "parameters": {}}},),
    )
    expected = r"codex 0\.999\.0 offers the tools shell, not 'exec_command'"
    with pytest.raises(PolicyError, match=expected) as err:
        fmt.check(request)  # type: ignore[attr-defined]
    assert f"written for version {KNOWN_VERSION}" in str(err.value)


def test_the_version_is_pinned_and_overridable(monkeypatch: pytest.MonkeyPatch) -> None:
    assert cli_definition("codex").package.version == PINNED_VERSION
    monkeypatch.setenv("ARES_CODEX_VERSION", "0.170.0")
    package = cli_definition("codex").package
    assert package.version == "0.170.0" and package.executable == "/opt/ares/agents/codex-0.170.0/bin/codex"


def test_the_config_ares_writes_uses_the_proxy_provider_with_everything_outbound_off() -> None:
    config = tomllib.loads(config_toml("ares-policy"))
    assert config["model_provider"] == "ares" and config["model_providers"]["ares"]["wire_api"] == "responses"
    assert config["approval_policy"] == "never" and config["check_for_update_on_startup"] is False
    assert config["analytics"]["enabled"] is False and config["features"]["apps"] is False
