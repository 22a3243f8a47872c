"""mini-swe-agent's own loop as an ARES code agent, through the real reset/step loop on real sandboxes.

Both transports: in process (mini's model calls await the environment's LLM client) and over HTTP
(mini's own LiteLLM model talks to a real interception proxy on loopback).
"""

from __future__ import annotations

import asyncio
import json
import platform
import subprocess
import sys
import threading
from pathlib import Path

import jinja2
import pytest
import yaml

pytest.importorskip("ares.agents.mini_swe._mini")  # mini-swe-agent, imported the way ARES does (quietly)

import ares
from ares.agents.mini_swe import (
    SUBMIT_COMMAND,
    MiniSweActionFormat,
    MiniSweAgentFactory,
    MiniSweConfig,
)
from ares.agents.mini_swe.bridge import THREAD_PREFIX
from ares.agents.mini_swe.config import TEXT_ACTION_REGEX
from ares.core.status import EpisodeStatus
from ares.envs.code_env import CodeEnvironment
from ares.errors import LLMError, PolicyError
from ares.llm.interceptor import LLMClient
from ares.llm.types import LLMRequest, LLMResponse
from ares.policies import make_policy
from ares.proxy import InterceptionProxy
from ares.sandbox.base import Sandbox
from ares.tasks.model import Task

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MINI_CONFIGS = Path(sys.modules["minisweagent"].__file__ or "").parent / "config"
TRANSPORTS = ["in_process", "http"]


async def play(env: CodeEnvironment, policy: str, task: int | str = 0) -> ares.TimeStep:
    ts = await env.reset(task=task)
    assert env.task is not None
    pol = make_policy(policy)(env.task, env.action_format)
    while not ts.last():
        ts = await env.step(await pol.act(ts.observation))
    return ts


def assert_no_worker_thread() -> None:
    """Every mini worker thread has ended (the join bound only keeps a broken build from hanging)."""
    for thread in threading.enumerate():
        if thread.name.startswith(THREAD_PREFIX):
            thread.join(timeout=30)
    assert [t.name for t in threading.enumerate() if t.name.startswith(THREAD_PREFIX)] == []


def mini_template(config: str, section: str, key: str) -> str:
    return yaml.safe_load((MINI_CONFIGS / config).read_text())[section][key]


# ---------------------------------------------------------------- whole episodes


@pytest.mark.parametrize("actions", ["toolcall", "text"])
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_humaneval_oracle_scores_one_and_null_zero(transport: str, actions: str) -> None:
    factory = MiniSweAgentFactory(transport=transport, actions=actions)
    async with ares.make("humaneval", tasks="0:2", agent=factory) as env:
        for task in range(2):
            ts = await play(env, "oracle", task)
            assert ts.reward == 1.0
            assert env.episode is not None and env.episode.exit_reason == "submitted"
            assert (await play(env, "null", task)).reward == 0.0
    assert_no_worker_thread()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_harbor_fixtures_oracle_one_null_zero(transport: str) -> None:
    names = ["hello-file", "fix-bug", "json-reward"]
    factory = MiniSweAgentFactory(transport=transport)
    async with ares.make("harbor", path=FIXTURES / "harbor", tasks=names, agent=factory) as env:
        for name in names:
            assert (await play(env, "oracle", name)).reward == pytest.approx(1.0)
            assert (await play(env, "null", name)).reward == 0.0


async def test_http_sessions_on_a_shared_proxy_are_closed_after_each_episode() -> None:
    async with InterceptionProxy() as proxy:
        factory = MiniSweAgentFactory(transport="http", proxy=proxy)
        async with ares.make("humaneval", tasks="0:1", agent=factory) as env:
            ts = await env.reset()
            assert len(proxy.sessions) == 1
            ts = await env.step(env.action_format.submit())
            assert ts.last() and proxy.sessions == ()
            assert proxy.health()["ok"]


# ---------------------------------------------------------------- what the policy sees


async def test_the_policy_sees_minis_own_prompt_and_observations() -> None:
    async with ares.make("humaneval", tasks="0:1", agent=MiniSweAgentFactory()) as env:
        ts = await env.reset()
        request = ts.observation
        assert env.task is not None
        system = jinja2.Template(mini_template("mini.yaml", "agent", "system_template")).render()
        assert (
            request.system_prompt
            == system
            == "You are a helpful assistant that can interact with a computer."
        )
        (instance,) = request.messages
        assert instance.role == "user"
        assert instance.text.startswith(f"Please solve this issue: {env.task.instruction}")
        assert (
            "finish your work by issuing the following command: `echo COMPLETE_TASK_AND_SUBMIT"
            in instance.text
        )
        assert f"<system_information>\n{platform.system()} {platform.release()}" in instance.text
        assert [t["function"]["name"] for t in request.tools] == ["bash"]
        assert request.metadata == {"agent": "mini-swe-agent", "turn": 0}

        ts = await env.step(env.action_format.command("echo out; echo err >&2; exit 3"))
        reply = ts.observation.messages[-1]
        assert reply.role == "tool" and reply.tool_call_id == ts.observation.messages[-2].tool_calls[0].id
        # mini.yaml renders command results as JSON
        assert json.loads(reply.text) == {"returncode": 3, "output": "out\n[stderr]\nerr\n"}


async def test_text_mode_uses_minis_text_prompt_and_fence() -> None:
    async with ares.make("humaneval", tasks="0:1", agent=MiniSweAgentFactory(actions="text")) as env:
        ts = await env.reset()
        assert "```mswea_bash_command\nyour_command_here\n```" in (ts.observation.system_prompt or "")
        assert ts.observation.tools == ()
        ts = await env.step(env.action_format.command("pwd"))
        assert ts.observation.messages[-1].role == "user"
        assert (
            ts.observation.messages[-1].text == "<returncode>0</returncode>\n<output>\n/workspace\n</output>"
        )


async def test_both_transports_show_the_same_first_observation() -> None:
    seen = []
    for transport in TRANSPORTS:
        async with ares.make("humaneval", tasks="0:1", agent=MiniSweAgentFactory(transport=transport)) as env:
            seen.append((await env.reset()).observation)
    local, http = seen
    assert (http.system_prompt, http.messages, http.tools, http.model) == (
        local.system_prompt,
        local.messages,
        local.tools,
        local.model,
    )


async def test_a_reply_without_a_tool_call_gets_minis_format_error_until_it_gives_up() -> None:
    async with ares.make("humaneval", tasks="0:1", agent=MiniSweAgentFactory()) as env:
        await env.reset()
        for _ in range(2):
            ts = await env.step(LLMResponse(content="Let me think about it."))
            error = ts.observation.messages[-1]
            assert error.role == "user" and error.text.startswith("Tool call error:")
            assert "No tool calls found in the response." in error.text
        ts = await env.step(LLMResponse(content="Still thinking."))
        assert ts.last() and env.episode is not None and env.episode.exit_reason == "format_errors"


async def test_minis_config_overrides_apply() -> None:
    factory = MiniSweAgentFactory(overrides={"agent": {"step_limit": 1}}, model="my-policy")
    async with ares.make("humaneval", tasks="0:1", agent=factory) as env:
        ts = await env.reset()
        assert ts.observation.model == "my-policy"
        ts = await env.step(env.action_format.command("true"))
        assert ts.last() and env.episode is not None and env.episode.exit_reason == "step_limit"


# ---------------------------------------------------------------- ending: cancellation and errors


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_closing_while_mini_waits_for_the_llm_ends_its_thread(transport: str) -> None:
    env = ares.make("humaneval", tasks="0:1", agent=MiniSweAgentFactory(transport=transport))
    await env.reset()
    assert any(t.name.startswith(THREAD_PREFIX) for t in threading.enumerate())
    await env.close()
    assert env.episode is not None and env.episode.status is not EpisodeStatus.RUNNING
    assert_no_worker_thread()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_cancelling_a_step_during_a_long_command_ends_the_thread(transport: str) -> None:
    async with ares.make("humaneval", tasks="0:1", agent=MiniSweAgentFactory(transport=transport)) as env:
        await env.reset()
        sandbox = env.sandbox
        assert sandbox is not None
        step = asyncio.create_task(env.step(env.action_format.command("touch /tmp/started && sleep 600")))
        started = await sandbox.exec("until [ -e /tmp/started ]; do sleep 0.01; done", timeout_s=60)
        assert started.ok
        step.cancel()
        with pytest.raises(asyncio.CancelledError):
            await step
        assert env.episode is not None and env.episode.status is EpisodeStatus.CANCELLED
        assert_no_worker_thread()  # the 600 s command did not hold the thread


class FailsAfterFirstCall:
    """Passes the first call to the environment's client, then fails like a dead inference server."""

    def __init__(self, llm: LLMClient) -> None:
        self.llm = llm
        self.calls = 0

    async def __call__(self, request: LLMRequest) -> LLMResponse:
        self.calls += 1
        if self.calls > 1:
            raise LLMError("the inference server is down")
        return await self.llm(request)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_llm_error_ends_the_episode_as_errored(transport: str) -> None:
    factory = MiniSweAgentFactory(transport=transport)

    def agent(*, sandbox: Sandbox, llm: LLMClient, task: Task):  # type: ignore[no-untyped-def]
        return factory(sandbox=sandbox, llm=FailsAfterFirstCall(llm), task=task)

    async with ares.make("humaneval", tasks="0:1", agent=agent) as env:
        await env.reset()
        ts = await env.step(factory.action_format.command("echo hi"))
        assert ts.last() and ts.reward == 0.0
        episode = env.episode
        assert episode is not None and episode.status is EpisodeStatus.ERRORED and episode.error is not None
        assert episode.error.type == "LLMError" and "the inference server is down" in episode.error.message
    assert_no_worker_thread()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_sandbox_error_ends_the_episode_as_errored(transport: str) -> None:
    async with ares.make("humaneval", tasks="0:1", agent=MiniSweAgentFactory(transport=transport)) as env:
        await env.reset()
        assert env.sandbox is not None
        await env.sandbox.stop()  # the machine goes away under the agent
        ts = await env.step(env.action_format.command("echo hi"))
        episode = env.episode
        assert ts.last() and episode is not None and episode.status is EpisodeStatus.ERRORED
        assert episode.error is not None and episode.error.type == "SandboxError"
    assert_no_worker_thread()


# ---------------------------------------------------------------- action format, config, packaging


def test_tool_call_actions_carry_any_command_verbatim() -> None:
    from minisweagent.models.utils.actions_toolcall import parse_toolcall_actions

    fmt = MiniSweActionFormat()
    command = "cat <<'EOF' > x\n```\nodd \"quotes\" and \\ backslashes\nEOF"
    (call,) = fmt.command(command).tool_calls
    assert call.name == "bash" and json.loads(call.arguments) == {"command": command}

    class Wire:  # the attribute shape mini's parser reads
        id = call.id
        function = call

    assert parse_toolcall_actions([Wire], format_error_template="{{error}}")[0]["command"] == command
    assert json.loads(fmt.submit().tool_calls[0].arguments)["command"] == SUBMIT_COMMAND


def test_text_actions_round_trip_through_minis_parser_or_are_refused() -> None:
    from minisweagent.models.utils.actions_text import parse_regex_actions

    fmt = MiniSweActionFormat("text")
    command = "cat <<'EOF' > x\nline one\n  indented ``inline`` ticks\nEOF"
    content = fmt.command(command).content or ""
    assert parse_regex_actions(content, action_regex=TEXT_ACTION_REGEX, format_error_template="") == [
        {"command": command}
    ]
    with pytest.raises(PolicyError, match="actions='toolcall'"):
        fmt.command("echo a\n```\necho b")


def test_the_text_regex_is_minis_own_default() -> None:
    from minisweagent.models.litellm_textbased_model import LitellmTextbasedModelConfig

    assert LitellmTextbasedModelConfig.model_fields["action_regex"].default == TEXT_ACTION_REGEX


def test_bad_configs_fail_when_the_factory_is_built() -> None:
    with pytest.raises(ValueError, match="transport"):
        MiniSweConfig(transport="grpc")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="config not found"):
        MiniSweAgentFactory(config_file="no-such-config.yaml")
    with pytest.raises(ValueError, match="step_limit"):
        MiniSweAgentFactory(overrides={"agent": {"step_limit": "many"}})
    with pytest.raises(ValueError, match="only used with transport='http'"):
        MiniSweAgentFactory(proxy=InterceptionProxy())


def test_ares_imports_without_mini_and_the_factory_names_the_extra() -> None:
    script = (
        "import sys; sys.modules['minisweagent'] = None\n"
        "import ares, ares.agents, ares.agents.mini_swe\n"
        "from ares.agents.mini_swe import MiniSweActionFormat, MiniSweConfig\n"
        "try:\n"
        "    from ares.agents.mini_swe import MiniSweAgentFactory\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert "pip install 'ares[mswea]'" in out.stdout
