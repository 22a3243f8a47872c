"""ExternalAgent: a CLI agent run inside the sandbox, its HTTP LLM calls stepped through the proxy.

The agent is ARES's stdlib CLI (``tool_loop_cli.py``), a separate program in the sandbox's own
python3; every step of these episodes is a real HTTP call from inside the sandbox to the proxy
served on the sandbox's loopback.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

import ares
import host_processes
from ares.agents.external import ExternalAgent, ExternalAgentConfig, ExternalAgentFactory, tool_loop_cli
from ares.agents.tool_agent import ToolActionFormat, tool_call, tool_calls_response
from ares.envs.code_env import CodeEnvironment
from ares.errors import AgentError
from ares.llm.types import LLMRequest, LLMResponse
from ares.policies import make_policy
from ares.proxy import capped_site
from ares.sandbox.local import network
from nobody_python import SKIP_REASON, can_drop, nobody_python

pytest.importorskip("aiohttp")

ROOT = Path(__file__).resolve().parents[2]
HARBOR = ROOT / "tests" / "fixtures" / "harbor"
DIALECTS = ["chat", "responses", "anthropic"]


async def play(env: CodeEnvironment, policy: str, task: int = 0) -> ares.TimeStep:
    ts = await env.reset(task=task)
    assert env.task is not None
    pol = make_policy(policy)(env.task, env.action_format)
    while not ts.last():
        ts = await env.step(await pol.act(ts.observation))
    return ts


def bash(command: str) -> LLMResponse:
    return tool_calls_response(tool_call("bash", {"command": command}))


def last_tool_output(ts: ares.TimeStep) -> str:
    assert isinstance(ts.observation, LLMRequest)
    return ts.observation.messages[-1].text


@pytest.mark.parametrize("api", DIALECTS)
async def test_humaneval_oracle_scores_one_and_null_zero_in_every_dialect(api: str) -> None:
    env = ares.make("humaneval", tasks="0:2", agent=tool_loop_cli(api))
    try:
        assert (await play(env, "oracle", 0)).reward == 1.0
        assert (await play(env, "null", 1)).reward == 0.0
    finally:
        await env.close()


@pytest.mark.parametrize("name", ["fix-bug", "hello-file"])
async def test_harbor_fixtures_through_the_cli_agent(name: str) -> None:
    env = ares.make("harbor", path=HARBOR / name, agent=tool_loop_cli())
    try:
        assert (await play(env, "oracle")).reward == pytest.approx(1.0)
        assert (await play(env, "null")).reward == 0.0
    finally:
        await env.close()


async def test_the_cli_agent_runs_in_a_docker_container_too() -> None:
    """The Docker backend's loopback listener (podman here): oracle 1, null 0 in a container."""
    from ares.sandbox.docker import DockerConfig, DockerSandboxFactory
    from engine_kit import docker_kit

    try:
        url = str(docker_kit().ensure_engine().base_url)
    except RuntimeError as exc:
        pytest.skip(f"no Docker API engine: {exc}")
    factory = DockerSandboxFactory(DockerConfig(base_url=url))
    env = ares.make("harbor", path=HARBOR / "fix-bug", agent=tool_loop_cli(), sandbox_factory=factory)
    try:
        assert (await play(env, "oracle")).reward == pytest.approx(1.0)
        assert (await play(env, "null")).reward == 0.0
    finally:
        await env.close()
        factory.close()


async def test_the_observation_is_the_cli_agents_own_request() -> None:
    env = ares.make("humaneval", tasks="0:1", agent=tool_loop_cli("anthropic"))
    try:
        ts = await env.reset()
        request = ts.observation
        assert isinstance(request, LLMRequest)
        assert request.system_prompt is not None and "coding agent" in request.system_prompt
        assert [t["function"]["name"] for t in request.tools] == ["bash", "submit"]
        assert "has_close_elements" in request.messages[0].text
        ts = await env.step(bash("echo $OPENAI_BASE_URL $ANTHROPIC_BASE_URL; id -u"))
        tool = ts.observation.messages[-1]  # type: ignore[union-attr]
        assert tool.role == "tool" and tool.tool_call_id is not None
        assert "http://127.0.0.1:" in tool.text
        ts = await env.step(ToolActionFormat().submit())
        assert ts.last() and ts.reward == 0.0
    finally:
        await env.close()


async def test_the_sandboxed_agent_reaches_its_session_only() -> None:
    """From inside: no other session through the door, no host loopback service, no outside address."""
    host = socket.create_server(("127.0.0.1", 0))
    host_port = host.getsockname()[1]
    probe = f"""python3 - <<'EOF'
import json, os, socket, urllib.request, urllib.error
base = os.environ["OPENAI_BASE_URL"]
out = {{}}
for path in ("/s/other/v1/models", "/v1/models", "/health"):
    url = base.rsplit("/v1", 1)[0] + path
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            out[path] = r.status
    except urllib.error.HTTPError as e:
        out[path] = e.code
for addr in (("127.0.0.1", {host_port}), ("10.0.2.2", 80), ("1.1.1.1", 53)):
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect(addr)
        out[str(addr)] = "connected"
    except OSError as e:
        out[str(addr)] = type(e).__name__
print(json.dumps(out))
EOF"""
    env = ares.make("humaneval", tasks="0:1", agent=tool_loop_cli())
    try:
        await env.reset()
        ts = await env.step(bash(probe))
        seen = json.loads(last_tool_output(ts).split("\n", 1)[1])
        assert seen["/s/other/v1/models"] == 404
        assert seen["/v1/models"] == 200 and seen["/health"] == 200
        assert seen[str(("127.0.0.1", host_port))] == "ConnectionRefusedError"
        assert all(seen[k] != "connected" for k in (str(("10.0.2.2", 80)), str(("1.1.1.1", 53))))
    finally:
        host.close()
        await env.close()


FLOOD = """python3 - <<'EOF'
import os, socket, time
port = int(os.environ["OPENAI_BASE_URL"].rsplit(":", 1)[1].split("/")[0])
held = []
for _ in range(300):
    try:
        held.append(socket.create_connection(("127.0.0.1", port), timeout=2))
    except OSError:
        break
print("opened", len(held))
time.sleep(0.5)
EOF"""


async def test_a_connection_flood_from_the_sandbox_holds_few_host_fds() -> None:
    """Each accepted connection is a host fd: a sandbox that opens 300 must not make ARES hold them
    (uncapped, one sandbox made the host hold ~13,000), and the agent's session works afterwards."""
    env = ares.make("humaneval", tasks="0:1", agent=tool_loop_cli())
    try:
        await env.reset()
        before = len(os.listdir("/proc/self/fd"))
        step = asyncio.ensure_future(env.step(bash(FLOOD)))
        most = before
        while not step.done():
            most = max(most, len(os.listdir("/proc/self/fd")))
            await asyncio.sleep(0.02)
        ts = step.result()
        assert "opened 300" in last_tool_output(ts)
        # the cap, the connections refused in one accept round (the backlog), the sandbox's exec sockets
        assert most - before <= capped_site.DEFAULT_MAX_CONNECTIONS + capped_site.BACKLOG + 32
        ts = await env.step(bash("echo still served"))  # the CLI agent's next call got through
        assert "still served" in last_tool_output(ts)
    finally:
        await env.close()


async def test_closing_mid_episode_leaves_no_agent_process_or_task() -> None:
    env = ares.make("humaneval", tasks="0:1", agent=tool_loop_cli())
    await env.reset()
    sandbox = env.sandbox
    assert sandbox is not None
    tasks_before = {t for t in asyncio.all_tasks() if t is not asyncio.current_task()}
    await env.close()
    await asyncio.sleep(0)
    leftover = {t for t in asyncio.all_tasks() if t is not asyncio.current_task()} - tasks_before
    assert not [t for t in leftover if not t.done()]
    assert host_processes.processes_with("tool_loop_cli.py") == []


async def test_an_agent_that_never_calls_its_llm_fails_reset_clearly() -> None:
    config = ExternalAgentConfig(command="echo I do nothing; echo out of memory >&2; exit 3")
    env = ares.make("humaneval", tasks="0:1", agent=ExternalAgentFactory(config, ToolActionFormat()))
    try:
        with pytest.raises(AgentError, match="exited with code 3 before its first LLM call: out of memory"):
            await env.reset()
        assert env.episode is not None and env.episode.status.value == "errored"
        assert env.episode.metadata["agent"]["exit_code"] == 3  # the program's exit is on the episode
    finally:
        await env.close()
    quiet = ExternalAgentConfig(command="true")
    env = ares.make("humaneval", tasks="0:1", agent=ExternalAgentFactory(quiet, ToolActionFormat()))
    try:
        with pytest.raises(AgentError, match="without a single LLM call"):
            await env.reset()
    finally:
        await env.close()


async def test_a_timed_out_agent_ends_the_episode_with_a_reward() -> None:
    factory = tool_loop_cli()
    config = ExternalAgentConfig(command=factory.config.command, files=factory.config.files, timeout_s=3.0)
    built: list[ExternalAgent] = []

    def build(**kw: object) -> ExternalAgent:
        built.append(ExternalAgentFactory(config)(**kw))  # type: ignore[arg-type]
        return built[-1]

    env = ares.make("humaneval", tasks="0:1", agent=build)
    try:
        await env.reset()
        ts = await env.step(bash("sleep 30"))
        assert ts.last() and ts.reward == 0.0
        assert built[0].exit_status == "timed_out" and built[0].calls == 1
    finally:
        await env.close()


def test_config_is_checked() -> None:
    with pytest.raises(ValueError, match="empty"):
        ExternalAgentConfig(command=" ")
    with pytest.raises(ValueError, match="timeout_s"):
        ExternalAgentConfig(command="x", timeout_s=0)
    with pytest.raises(ValueError, match="port"):
        ExternalAgentConfig(command="x", port=70000)


@pytest.mark.skipif(not can_drop(), reason=SKIP_REASON)
def test_an_unprivileged_user_runs_external_agent_episodes() -> None:
    """The whole CLI run as nobody: local sandbox, loopback listener, proxy, oracle reward 1."""
    python = nobody_python() or pytest.skip(SKIP_REASON)
    state = Path(tempfile.mkdtemp(prefix="ares-external-"))
    try:
        os.chown(state, 65534, 65534)
        env = {
            "PATH": f"{Path(sys.executable).parent}:{network.SEARCH_PATH}",
            "PYTHONPATH": f"{ROOT / 'src'}:{sysconfig.get_paths()['purelib']}",
            "HOME": str(state),
            "LANG": "C.UTF-8",
            "ARES_SANDBOX_DIR": str(state / "sandboxes"),
        }
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python, "-m",
               "ares.cli.main", "run", "humaneval-cli", "--policy", "oracle", "--tasks", "0:2",
               "--out", str(state / "out")]  # fmt: skip
        result = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=state, timeout=240)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        summary = json.loads((state / "out" / "summary.json").read_text())
        assert summary["statuses"] == {"finished": 2} and summary["mean_reward"] == 1.0
    finally:
        shutil.rmtree(state, ignore_errors=True)
