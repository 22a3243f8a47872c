"""OpenCode (the real ``opencode-ai`` binary from npm) stepped through the proxy on the local sandbox.

Each episode runs ``opencode run`` in a local sandbox; its chat-completions calls are the
observations, answered by scripted policies in OpenCode's own tool language (``bash``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shlex
import socket

import pytest
from cli_kit import install_or_skip, play_out

import ares
from ares.agents.coding_clis import cli_agent, cli_definition
from ares.agents.coding_clis.opencode import PINNED_VERSION, opencode_config
from ares.envs.code_env import CodeEnvironment
from ares.errors import PolicyError
from ares.llm.types import LLMRequest, Message
from ares.policies.scripted import ReplayPolicy
from ares.sandbox.local import LocalSandbox
from ares.tasks.humaneval import load_humaneval

pytest.importorskip("aiohttp")

#: What OpenCode would reach on its own: its model catalog, its site (sharing), the npm registry
#: (update checks, provider packages) and GitHub (ripgrep downloads).
OUTBOUND_HOSTS = ("models.dev", "opencode.ai", "registry.npmjs.org", "github.com")


@pytest.fixture(scope="module")
def opencode_installed() -> None:
    install_or_skip("opencode")


@pytest.mark.usefixtures("opencode_installed")
async def test_oracle_solves_through_opencode_and_the_episode_keeps_its_request_and_report() -> None:
    env = ares.make("humaneval-opencode", tasks="0:1")
    try:
        first = await env.reset(task=0)
        request = first.observation
        assert isinstance(request, LLMRequest) and request.model == "ares-policy"
        assert "You are opencode, an interactive CLI tool" in (request.system_prompt or "")  # its own
        assert "has_close_elements" in request.messages[-1].text  # the instruction, read from stdin
        tools = {t["function"]["name"] for t in request.tools}
        assert {"bash", "edit", "write", "read"} <= tools
        ts = await play_out(env, first, "oracle")
        assert ts.reward == 1.0
        assert env.episode is not None and env.episode.status.value == "finished"
        report = env.episode.metadata["agent"]
        assert report["exit_status"] == "exited" and report["exit_code"] == 0 and report["llm_calls"] == 2
        assert report["cli"] == "opencode" and report["version"] == PINNED_VERSION
        assert report["stdout_tail"].strip() == "Done."  # the final answer, printed by `opencode run`
        assert "bash /solution/solve.sh" in report["stderr_tail"]  # its transcript of the tool call
        files = [line.split(" ")[0] for line in report["home_files"]]
        assert ".config/opencode/opencode.json" in files and ".local/share/opencode/opencode.db" in files
        # The provider package is the one inside the binary: nothing was installed at run time.
        assert not [f for f in files if "node_modules" in f or f.endswith("package.json")]
    finally:
        await env.close()


@pytest.mark.usefixtures("opencode_installed")
async def test_null_scores_zero() -> None:
    env = ares.make("humaneval-opencode", tasks="0:1")
    try:
        ts = await play_out(env, await env.reset(task=0), "null")
        assert ts.reward == 0.0
        assert env.episode is not None and env.episode.status.value == "finished"
        assert env.episode.metadata["agent"]["exit_code"] == 0
    finally:
        await env.close()


def _probe_command() -> str:
    """Python connecting to OpenCode's hosts (by name, and by the addresses the host resolves)."""
    targets: list[str] = list(OUTBOUND_HOSTS)
    for host in OUTBOUND_HOSTS:
        with contextlib.suppress(OSError):  # a host this machine cannot resolve is probed by name only
            targets += sorted({info[4][0] for info in socket.getaddrinfo(host, 443, socket.AF_INET)})
    probe = (
        "import socket\n"
        f"for target in {targets!r}:\n"
        "    try:\n"
        "        socket.create_connection((target, 443), timeout=5).close()\n"
        "        print('REACHED', target)\n"
        "    except OSError as exc:\n"
        "        print('blocked', target, type(exc).__name__)\n"
    )
    return f"python3 -c {shlex.quote(probe)}"


@pytest.mark.usefixtures("opencode_installed")
async def test_opencodes_outbound_hosts_are_unreachable_through_its_own_bash_tool() -> None:
    """The sandbox reaches nothing but its proxy session: a probe run by OpenCode's ``bash`` tool
    fails to connect to each host OpenCode would call, and the run still ends normally."""
    env = ares.make("humaneval-opencode", tasks="0:1")
    try:
        ts = await env.reset(task=0)
        fmt = env.action_format
        policy = ReplayPolicy([fmt.command(_probe_command())], fmt.submit())
        ts = await env.step(await policy.act(ts.observation))
        assert isinstance(ts.observation, LLMRequest)
        output = ts.observation.messages[-1].text  # the tool result OpenCode sends back
        assert output.count("blocked") >= len(OUTBOUND_HOSTS) and "REACHED" not in output, output
        ts = await env.step(await policy.act(ts.observation))
        assert ts.last() and env.episode is not None and env.episode.status.value == "finished"
        assert env.episode.metadata["agent"]["exit_code"] == 0
    finally:
        await env.close()


@pytest.mark.usefixtures("opencode_installed")
async def test_configs_from_the_task_its_home_and_its_environment_are_ignored() -> None:
    """A poisoned config everywhere OpenCode looks (project files, the sandbox user's HOME, the
    OPENCODE_CONFIG* variables) would send it elsewhere and deny bash; the oracle still scores 1."""
    poison = {
        "model": "evil/model", "enabled_providers": ["evil"], "permission": {"bash": "deny"},
        "provider": {"evil": {"npm": "@ai-sdk/openai-compatible", "models": {"model": {}},
                              "options": {"baseURL": "http://127.0.0.1:9/v1"}}},
    }  # fmt: skip
    text = json.dumps(poison)
    task = load_humaneval()[0]
    task = dataclasses.replace(
        task,
        workspace={
            **task.workspace, "opencode.json": text, ".opencode/opencode.json": text,
            "home/.config/opencode/opencode.json": text,
        },
        env={
            **task.env, "HOME": f"{task.workdir}/home", "XDG_CONFIG_HOME": f"{task.workdir}/home/.config",
            "OPENCODE_CONFIG": f"{task.workdir}/opencode.json", "OPENCODE_CONFIG_CONTENT": text,
            "OPENCODE_CONFIG_DIR": f"{task.workdir}/.opencode",
        },
    )  # fmt: skip
    env = CodeEnvironment([task], agent_factory=cli_agent("opencode"), sandbox_factory=LocalSandbox)
    try:
        ts = await env.reset(task=0)
        assert isinstance(ts.observation, LLMRequest) and ts.observation.model == "ares-policy"
        assert (await play_out(env, ts, "oracle")).reward == 1.0
    finally:
        await env.close()


def test_a_request_without_opencodes_bash_tool_fails_the_oracle_naming_the_version() -> None:
    fmt = cli_agent("opencode", "9.0.0").action_format
    request = LLMRequest(
        messages=(Message("user", "hi"),),
        tools=({"type": "function", "function": {"name": "shell", "parameters": {}}},),
    )
    with pytest.raises(PolicyError, match=r"opencode 9\.0\.0 offers the tools shell, not 'bash'") as err:
        fmt.check(request)  # type: ignore[attr-defined]
    assert f"written for version {PINNED_VERSION}" in str(err.value)


def test_the_version_is_pinned_and_overridable(monkeypatch: pytest.MonkeyPatch) -> None:
    assert cli_definition("opencode").package.version == PINNED_VERSION
    monkeypatch.setenv("ARES_OPENCODE_VERSION", "1.18.0")
    package = cli_definition("opencode").package
    assert package.executable == "/opt/ares/agents/opencode-1.18.0/bin/opencode"


def test_the_config_names_only_the_proxy_and_turns_sharing_and_updates_off() -> None:
    config = opencode_config("m")
    assert config["model"] == "ares/m" and config["enabled_providers"] == ["ares"]
    assert config["provider"]["ares"]["options"]["baseURL"] == "{env:ARES_PROXY_URL}"
    assert config["autoupdate"] is False and config["share"] == "disabled" and config["plugin"] == []
    assert config["permission"] == {"*": "allow"}
