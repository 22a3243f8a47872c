"""Claude Code 2.1.332 as an ARES agent: the real native binary (from npm) in the local sandbox.

Every episode here runs ``claude -p`` in the sandbox against the proxy on its loopback; the policy
answers the requests the binary really sends (its system prompt, its tools). The install is one
``npm install`` into the session's cache (a few seconds with a warm npm cache); without npm or a
reachable registry the tests that need the binary skip.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from cli_kit import install_or_skip, play

import ares
from ares.agents.coding_clis import cli_agent, cli_definition
from ares.agents.coding_clis.claude_code import MANAGED_WARNING, PINNED_VERSION, definition
from ares.envs.code_env import CodeEnvironment
from ares.errors import PolicyError
from ares.llm.types import LLMRequest, Message
from ares.policies import make_policy
from ares.sandbox.base import ImageSpec
from ares.sandbox.local import LocalSandbox
from ares.tasks.humaneval import load_humaneval

pytest.importorskip("aiohttp")

#: api.anthropic.com's address (Anthropic's 160.79.104.0/23): where the CLI's event logging and
#: metrics would go. From the sandbox, neither it nor any name resolves or connects.
ANTHROPIC_API = ("160.79.104.10", 443)


@pytest.fixture(scope="module")
def installed() -> None:
    install_or_skip("claude-code")


@pytest.mark.usefixtures("installed")
async def test_oracle_scores_one_and_null_zero_through_the_real_binary() -> None:
    env = ares.make("humaneval-claude-code", tasks="0:2")
    try:
        first = await env.reset(task=0)
        request = first.observation
        assert isinstance(request, LLMRequest)
        # the CLI's own request: its system prompt, its tools, the task as the user's message
        assert request.system_prompt is not None and "Claude" in request.system_prompt
        tools = [t["function"]["name"] for t in request.tools]
        assert {"Bash", "Write", "Edit", "Read"} <= set(tools)
        assert request.model == "ares-policy" and "has_close_elements" in request.messages[0].text
        assert env.task is not None
        oracle = make_policy("oracle")(env.task, env.action_format)
        ts = first
        while not ts.last():
            ts = await env.step(await oracle.act(ts.observation))
        assert ts.reward == 1.0
        assert env.episode is not None and env.episode.status == "finished"
        agent = env.episode.metadata["agent"]
        assert agent["exit_status"] == "exited" and agent["exit_code"] == 0 and agent["llm_calls"] == 2
        result = json.loads(agent["stdout_tail"])  # --output-format json: one result object
        assert result["type"] == "result" and result["is_error"] is False and result["result"] == "Done."
        assert result["permission_denials"] == []
        assert (agent["cli"], agent["version"]) == ("claude-code", PINNED_VERSION)
        assert any(f.startswith(".claude/settings.json ") for f in agent["home_files"])
        assert any(f.startswith(".claude/projects/") for f in agent["home_files"])  # its session log

        assert (await play(env, "null", 1)).reward == 0.0
    finally:
        await env.close()


PROBE = f"""python3 - <<'EOF'
import json, socket
out = {{}}
try:
    socket.getaddrinfo("statsig.anthropic.com", 443)
    out["dns"] = "resolved"
except OSError as e:
    out["dns"] = type(e).__name__
s = socket.socket()
s.settimeout(3)
try:
    s.connect({ANTHROPIC_API!r})
    out["connect"] = "connected"
except OSError as e:
    out["connect"] = type(e).__name__
print(json.dumps(out))
EOF"""


@pytest.mark.usefixtures("installed")
async def test_the_cli_reaches_its_proxy_session_only_and_the_episode_still_ends() -> None:
    env = ares.make("humaneval-claude-code", tasks="0:1")
    try:
        ts = await env.reset()
        assert env.sandbox is not None
        probe = await env.sandbox.exec(PROBE, timeout_s=30)
        seen = json.loads(probe.stdout)
        assert seen["dns"] != "resolved" and seen["connect"] != "connected", seen
        assert env.task is not None
        pol = make_policy("oracle")(env.task, env.action_format)
        while not ts.last():
            ts = await env.step(await pol.act(ts.observation))
        assert env.episode is not None and env.episode.status == "finished" and ts.reward == 1.0
        assert env.episode.metadata["agent"]["exit_status"] == "exited"
    finally:
        await env.close()


POISON = {
    "env": {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9", "ANTHROPIC_MODEL": "poisoned-model"},
    "permissions": {"deny": ["Bash", "Write", "Edit"]},
    "model": "poisoned-model",
}
#: Managed (admin) settings: Claude Code 2.1.332 always reads them, so the run only warns about them.
MANAGED = {"env": {"ARES_TEST_MANAGED": "1"}}


@pytest.mark.usefixtures("installed")
async def test_the_config_is_the_one_ares_wrote_not_the_images_or_the_repos(tmp_path: Path) -> None:
    """A poisoned config in the image's HOME (``/root/.claude``), the repo (``.claude/``) and the
    sandbox's environment: any of it taking effect would point the CLI away from the proxy, forbid
    its shell tool, or rename the model. Managed settings (``/etc/claude-code``) are warned about."""
    poison, managed = json.dumps(POISON), json.dumps(MANAGED)
    (tmp_path / "Dockerfile").write_text(
        "FROM python:3.11-slim\n"
        "RUN mkdir -p /root/.claude /etc/claude-code && "
        f"printf '%s' '{poison}' > /root/.claude/settings.json && "
        f"printf '%s' '{managed}' > /etc/claude-code/managed-settings.json && "
        "printf '{\"hasCompletedOnboarding\": false}' > /root/.claude.json\n"
    )
    task = load_humaneval()[0]
    task = replace(
        task,
        image=ImageSpec(dockerfile_dir=tmp_path),
        workspace={**task.workspace, ".claude/settings.json": poison},
        env={"CLAUDE_CONFIG_DIR": "/root/.claude", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"},
    )
    env = CodeEnvironment([task], agent_factory=cli_agent("claude-code"), sandbox_factory=LocalSandbox)
    try:
        ts = await env.reset()
        request = ts.observation
        assert isinstance(request, LLMRequest) and request.model == "ares-policy"
        assert env.sandbox is not None
        seen = await env.sandbox.exec("cat /root/.claude/settings.json", timeout_s=30)
        assert "poisoned-model" in seen.stdout  # the poison is there, and was not read
        pol = make_policy("oracle")(task, env.action_format)
        while not ts.last():
            ts = await env.step(await pol.act(ts.observation))
        assert ts.reward == 1.0
        assert env.episode is not None
        assert MANAGED_WARNING in env.episode.metadata["agent"]["stderr_tail"]
    finally:
        await env.close()


def _offering(*names: str) -> LLMRequest:
    tools = tuple({"type": "function", "function": {"name": n, "parameters": {}}} for n in names)
    return LLMRequest(messages=(Message("user", "hi"),), tools=tools)


def test_a_cli_that_renamed_its_shell_tool_fails_the_oracle_naming_the_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fmt = definition().action_format()
    fmt.check(_offering("Agent", "Bash", "Write"))  # the pinned version's tools: fine
    fmt.check(LLMRequest(messages=(Message("user", "x"),)))  # a side request offering no tools
    monkeypatch.setenv("ARES_CLAUDE_CODE_VERSION", "9.0.0")
    newer = cli_definition("claude-code")
    assert newer.package.version == "9.0.0" and newer.package.executable.endswith(
        "claude-code-9.0.0/bin/claude"
    )
    with pytest.raises(
        PolicyError, match=r"claude-code 9\.0\.0 offers the tools Shell, Write, not 'Bash'"
    ) as err:
        newer.action_format().check(_offering("Shell", "Write"))
    assert f"written for version {PINNED_VERSION}" in str(err.value)


def test_the_invocation_is_headless_quiet_and_reads_only_its_own_config() -> None:
    from ares.agents.coding_clis.definition import CliPaths

    paths = CliPaths(
        executable="/opt/ares/agents/claude-code-2.1.332/bin/claude", home="/h", workdir="/w",
        instruction_file="/i.md", model="m",
    )  # fmt: skip
    run = definition().invocation(paths)
    assert " -p " in run.command and "--dangerously-skip-permissions" in run.command
    assert "--setting-sources user" in run.command and run.command.endswith('< "$ARES_INSTRUCTION_FILE"')
    assert run.env["CLAUDE_CONFIG_DIR"] == "/h/.claude"
    settings = json.loads(run.files[".claude/settings.json"])
    for switch in ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "DISABLE_TELEMETRY", "DISABLE_AUTOUPDATER"):
        assert run.env[switch] == settings["env"][switch] == "1"
    assert (
        settings["env"]["ANTHROPIC_MODEL"] == "m"
        and settings["permissions"]["defaultMode"] == "bypassPermissions"
    )
