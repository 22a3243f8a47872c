"""The clients on the official ``openai`` and ``anthropic`` SDKs, against a real loopback server.

The server (tests/fake_vendors.py) answers with wire JSON rendered by ARES's own converters; the
SDKs do the HTTP, retries and timeouts for real.
"""

from __future__ import annotations

import asyncio
import json
import os
import pickle
import shutil
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import ares
from ares.errors import LLMError, MalformedResponseError
from ares.llm.anthropic_messages import response_to_anthropic
from ares.llm.openai_chat import response_to_openai
from ares.llm.openai_client import LLMHTTPError
from ares.llm.openai_responses import response_to_responses
from ares.llm.sdk.anthropic_sdk import DEFAULT_MAX_TOKENS, AnthropicSDKClient
from ares.llm.sdk.base import SDKClient
from ares.llm.sdk.openai_sdk import OpenAIChatSDKClient, OpenAIResponsesSDKClient
from ares.llm.sdk.pricing import Price
from ares.llm.types import LLMRequest, LLMResponse, Message, SamplingParams, ToolCall, Usage, assistant, user
from ares.policies import make_policy
from ares.policies.scripted import oracle_command
from ares.policies.sdk import ClientPolicy, ClientPolicyFactory
from ares.rollout.runner import run_episodes
from ares.tasks.model import Task
from fake_vendors import CHAT_PATH, MESSAGES_PATH, RESPONSES_PATH, FakeVendors, Reply, error_body

BASH_TOOL = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run a shell command.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
}
LS, PWD = ToolCall("call_1", "bash", '{"command": "ls"}'), ToolCall("call_2", "bash", '{"command": "pwd"}')
REQUEST = LLMRequest(
    messages=(
        user("List the files, then print the directory."),
        assistant(None, (LS, PWD)),
        Message("tool", "a.txt", tool_call_id="call_1"),
        Message("tool", "/work", tool_call_id="call_2"),
    ),
    system_prompt="You are a shell agent.",
    tools=(BASH_TOOL,),
    sampling=SamplingParams(temperature=0.0, max_tokens=256),
    model="the-agents-own-model",
    prompt_token_ids=(1, 2, 3),
    metadata={"episode": 3},
    extra={"stream": True},  # the agent streams; the clients ask for one whole answer
)
REPLY = LLMResponse(
    content="Looking at both.",
    tool_calls=(ToolCall("call_3", "bash", '{"command":"cat a.txt"}'), ToolCall("call_4", "bash", "{}")),
    finish_reason="tool_calls",
    usage=Usage(1200, 80),
    model="served-snapshot-2025",
    id="reply_1",
)
PRICE = Price(input=2.0, output=8.0, cache_read=0.5, cache_write=2.5)


def _with_usage(wire: dict[str, Any], **usage: Any) -> dict[str, Any]:
    return {**wire, "usage": {**wire["usage"], **usage}}


@dataclass(frozen=True)
class Vendor:
    client: type[SDKClient]
    path: str
    wire: dict[str, Any]  # the canned 200 body
    body: dict[str, Any]  # what the SDK must send for REQUEST
    max_tokens_key: str
    cost: float  # of REPLY's usage at PRICE

    @property
    def name(self) -> str:
        return self.client.policy

    def url(self, fake: FakeVendors) -> str:
        return fake.anthropic_url if self.path == MESSAGES_PATH else fake.openai_url


TOOL_CALLS_WIRE = [
    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
    for c in (LS, PWD)
]
CHAT = Vendor(
    OpenAIChatSDKClient,
    CHAT_PATH,
    _with_usage(response_to_openai(REPLY), prompt_tokens_details={"cached_tokens": 200}),
    {
        "model": "policy-model",
        "messages": [
            {"role": "system", "content": "You are a shell agent."},
            {"role": "user", "content": "List the files, then print the directory."},
            {"role": "assistant", "tool_calls": TOOL_CALLS_WIRE},
            {"role": "tool", "content": "a.txt", "tool_call_id": "call_1"},
            {"role": "tool", "content": "/work", "tool_call_id": "call_2"},
        ],
        "tools": [BASH_TOOL],
        "temperature": 0.0,
        "max_tokens": 256,
    },
    "max_tokens",
    (1000 * 2.0 + 80 * 8.0 + 200 * 0.5) / 1e6,
)
RESPONSES = Vendor(
    OpenAIResponsesSDKClient,
    RESPONSES_PATH,
    _with_usage(response_to_responses(REPLY), input_tokens_details={"cached_tokens": 200}),
    {
        "model": "policy-model",
        "instructions": "You are a shell agent.",
        "input": [
            {"role": "user", "content": "List the files, then print the directory."},
            *[
                {"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments}
                for c in (LS, PWD)
            ],
            {"type": "function_call_output", "call_id": "call_1", "output": "a.txt"},
            {"type": "function_call_output", "call_id": "call_2", "output": "/work"},
        ],
        "tools": [{"type": "function", **BASH_TOOL["function"]}],
        "temperature": 0.0,
        "max_output_tokens": 256,
    },
    "max_output_tokens",
    (1000 * 2.0 + 80 * 8.0 + 200 * 0.5) / 1e6,
)
MESSAGES = Vendor(
    AnthropicSDKClient,
    MESSAGES_PATH,
    _with_usage(response_to_anthropic(REPLY), cache_read_input_tokens=200, cache_creation_input_tokens=100),
    {
        "model": "policy-model",
        "system": "You are a shell agent.",
        "messages": [
            {"role": "user", "content": "List the files, then print the directory."},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": c.id, "name": c.name, "input": json.loads(c.arguments)}
                    for c in (LS, PWD)
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "call_1", "content": "a.txt"},
                    {"type": "tool_result", "tool_use_id": "call_2", "content": "/work"},
                ],
            },
        ],
        "tools": [
            {
                "name": "bash",
                "description": "Run a shell command.",
                "input_schema": BASH_TOOL["function"]["parameters"],
            }
        ],
        "temperature": 0.0,
        "max_tokens": 256,
    },
    "max_tokens",
    (1200 * 2.0 + 80 * 8.0 + 200 * 0.5 + 100 * 2.5) / 1e6,
)
VENDORS = pytest.mark.parametrize("vendor", [CHAT, RESPONSES, MESSAGES], ids=lambda v: v.name)


@pytest.fixture
async def fake() -> AsyncIterator[FakeVendors]:
    async with FakeVendors({v.path: v.wire for v in (CHAT, RESPONSES, MESSAGES)}) as server:
        yield server


def client_for(vendor: Vendor, fake: FakeVendors, **options: Any) -> SDKClient:
    options = {"api_key": "sk-test", "model": "policy-model", "max_retries": 2, **options}
    return vendor.client(base_url=vendor.url(fake), **options)


@VENDORS
async def test_sends_the_converters_body_and_parses_the_raw_reply(vendor: Vendor, fake: FakeVendors) -> None:
    async with client_for(vendor, fake, prices=PRICE) as client:
        resp = await client(REQUEST)
    [sent] = fake.received
    assert sent.path == vendor.path and sent.headers["authorization"] == "Bearer sk-test"
    assert sent.body == vendor.body
    assert resp.content == "Looking at both." and resp.tool_calls == REPLY.tool_calls
    assert resp.finish_reason == "tool_calls" and resp.model == "served-snapshot-2025"
    assert resp.usage is not None and (resp.usage.prompt_tokens, resp.usage.completion_tokens) == (1200, 80)
    assert resp.cost == pytest.approx(vendor.cost)


@VENDORS
async def test_client_settings_replace_the_agents_sampling(vendor: Vendor, fake: FakeVendors) -> None:
    async with client_for(vendor, fake, max_tokens=77, temperature=0.25) as client:
        resp = await client(REQUEST)
    body = fake.received[0].body
    assert body[vendor.max_tokens_key] == 77 and body["temperature"] == 0.25
    assert not any(key.startswith("ares_") or key == "stream" for key in body)
    assert resp.cost is None  # no price table, no cost


async def test_price_table_is_looked_up_by_served_then_requested_model(fake: FakeVendors) -> None:
    tables = [{"served-snapshot-2025": PRICE}, {"policy-model": PRICE}, {"another-model": PRICE}]
    costs = []
    for prices in tables:
        async with client_for(CHAT, fake, prices=prices) as client:
            costs.append((await client(REQUEST)).cost)
    assert costs == [pytest.approx(CHAT.cost), pytest.approx(CHAT.cost), None]


@VENDORS
async def test_429_with_retry_after_is_retried_by_the_sdk(vendor: Vendor, fake: FakeVendors) -> None:
    # A tiny Retry-After (the SDKs honour 0 < seconds <= 60) keeps the test from sleeping their backoff.
    busy = Reply(429, error_body(vendor.path, 429, "rate limited"), {"Retry-After": "0.001"})
    fake.then(busy, busy)
    async with client_for(vendor, fake) as client:
        resp = await client(REQUEST)
    assert resp.tool_calls == REPLY.tool_calls
    assert [r.headers["x-stainless-retry-count"] for r in fake.received] == ["0", "1", "2"]


@VENDORS
async def test_persistent_500_gives_up_after_max_retries(vendor: Vendor, fake: FakeVendors) -> None:
    soon = {"retry-after-ms": "1"}  # the SDKs' own header for a short wait: no backoff sleeps
    fake.then(*[Reply(500, error_body(vendor.path, 500, "the server had an error"), soon)] * 10)
    async with client_for(vendor, fake, max_retries=2) as client:
        with pytest.raises(
            LLMHTTPError, match=r"returned HTTP 500 \(3 attempt\(s\)\): .*the server had an error"
        ):
            await client(REQUEST)
    assert len(fake.received) == 3


@VENDORS
async def test_400_is_not_retried(vendor: Vendor, fake: FakeVendors) -> None:
    fake.then(Reply(400, error_body(vendor.path, 400, "messages.0: unexpected field")))
    async with client_for(vendor, fake) as client:
        with pytest.raises(LLMHTTPError, match=r"HTTP 400 \(1 attempt\(s\)\)") as info:
            await client(REQUEST)
    assert info.value.status == 400 and "unexpected field" in info.value.body
    assert len(fake.received) == 1


@VENDORS
async def test_a_server_that_never_answers_times_out(vendor: Vendor, fake: FakeVendors) -> None:
    fake.then(Reply(hang=True), Reply(hang=True))
    async with client_for(vendor, fake, timeout_s=0.3, max_retries=0) as client:
        with pytest.raises(LLMError, match=r"timed out after 0\.3s \(1 attempt\(s\)\); raise --timeout"):
            await asyncio.wait_for(client(REQUEST), 30)  # a guard: the client's own timeout must fire
    assert len(fake.received) == 1


async def test_a_body_that_is_not_json_is_malformed(fake: FakeVendors) -> None:
    fake.then(Reply(200, b"<html>502 Bad Gateway</html>"))
    async with client_for(CHAT, fake) as client:
        with pytest.raises(MalformedResponseError, match="not JSON"):
            await client(REQUEST)


@VENDORS
async def test_pickles_without_its_sdk_client_and_rebuilds_it(vendor: Vendor, fake: FakeVendors) -> None:
    client = client_for(vendor, fake, prices={"served-snapshot-2025": PRICE})
    await client(REQUEST)  # the live SDK client now exists
    copy = pickle.loads(pickle.dumps(client))
    assert copy is not client and (copy.model, copy.base_url, copy.prices) == (
        client.model,
        client.base_url,
        client.prices,
    )
    assert (await copy(REQUEST)).cost == pytest.approx(vendor.cost)
    await client.aclose()
    await copy.aclose()
    assert len(fake.received) == 2


@VENDORS
async def test_aclose_closes_the_sdk_client_and_refuses_later_calls(
    vendor: Vendor, fake: FakeVendors
) -> None:
    client = client_for(vendor, fake)
    await client(REQUEST)
    sdk = client._sdk
    await client.aclose()
    assert sdk.is_closed()
    with pytest.raises(LLMError, match="is closed"):
        await client(REQUEST)
    await client.aclose()  # idempotent


async def test_concurrent_first_calls_build_one_sdk_client(fake: FakeVendors) -> None:
    async with client_for(CHAT, fake) as client:
        responses = await asyncio.gather(*(client(REQUEST) for _ in range(8)))
        sdk = client._sdk
        assert sdk is not None and not sdk.is_closed()
    assert {r.id for r in responses} == {"reply_1"} and len(fake.received) == 8
    assert sdk.is_closed()


def test_from_env_reads_the_vendors_variables() -> None:
    env = {"ANTHROPIC_API_KEY": "k1", "ANTHROPIC_MODEL": "claude-x", "TEAM_KEY": "k2"}
    client = AnthropicSDKClient.from_env(env=env)
    assert (client.model, client.base_url, client._api_key) == ("claude-x", "https://api.anthropic.com", "k1")
    assert AnthropicSDKClient.from_env(api_key_env="TEAM_KEY", env=env)._api_key == "k2"
    assert "k1" not in repr(client)
    with pytest.raises(LLMError, match="set ANTHROPIC_API_KEY"):
        AnthropicSDKClient.from_env(model="claude-x", env={})
    with pytest.raises(LLMError, match=r"--model NAME .* or set OPENAI_MODEL"):
        OpenAIResponsesSDKClient.from_env(env={"OPENAI_API_KEY": "k"})
    with pytest.raises(LLMError, match="TEAM_KEY is not set"):
        OpenAIChatSDKClient.from_env(api_key_env="TEAM_KEY", env={"OPENAI_MODEL": "m"})
    local = OpenAIChatSDKClient.from_env(
        env={"OPENAI_MODEL": "m", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1/"}
    )
    assert local.base_url == "http://127.0.0.1:9/v1" and local._api_key is None
    with pytest.raises(LLMError, match="http"):
        OpenAIChatSDKClient(base_url="localhost:8000/v1", model="m")


def test_anthropic_gets_a_max_tokens_when_nobody_set_one() -> None:
    client = AnthropicSDKClient(base_url="http://127.0.0.1:9", model="m")
    assert client.request_body(LLMRequest(messages=(user("hi"),)))["max_tokens"] == DEFAULT_MAX_TOKENS


async def test_no_model_anywhere_is_a_clear_error(fake: FakeVendors) -> None:
    async with client_for(CHAT, fake, model=None) as client:
        with pytest.raises(LLMError, match="no model to ask for"):
            await client(LLMRequest(messages=(user("hi"),)))
    assert fake.received == []


@pytest.mark.parametrize(("name", "package"), [("openai-sdk", "openai"), ("anthropic", "anthropic")])
def test_a_missing_sdk_names_the_extra(name: str, package: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, package, None)  # what an uninstalled package looks like to import
    with pytest.raises(LLMError, match=rf"pip install 'ares\[{package}\]'"):
        make_policy(name, model="m", api_key="k")


@VENDORS
async def test_registered_policies_share_one_client(vendor: Vendor, fake: FakeVendors) -> None:
    factory = make_policy(vendor.name, base_url=vendor.url(fake), model="policy-model", api_key="k")
    assert isinstance(factory, ClientPolicyFactory) and isinstance(factory.client, vendor.client)
    task = Task(id="t1", instruction="do it", tests={"test.sh": "exit 0"})
    first, second = factory(task, None), factory(task, None)  # type: ignore[arg-type]
    assert isinstance(first, ClientPolicy) and first.client is second.client
    assert pickle.loads(pickle.dumps(factory)).client.model == "policy-model"  # it travels to Ray actors
    assert (await first.act(REQUEST)).tool_calls == REPLY.tool_calls
    await factory.aclose()
    with pytest.raises(LLMError, match="closed"):
        await second.act(REQUEST)


async def test_humaneval_episode_with_the_chat_sdk_policy(fake: FakeVendors) -> None:
    async with ares.make("humaneval", tasks="0:1") as env:
        task, fmt = env.tasks[0], env.action_format
    usage = {"usage": {"prompt_tokens": 500, "completion_tokens": 100, "total_tokens": 600}}
    fake.then(
        *(
            Reply(body={**response_to_openai(r), **usage})
            for r in (fmt.command(oracle_command(task)), fmt.submit())
        )
    )
    client = OpenAIChatSDKClient(base_url=fake.openai_url, api_key="k", model="m", prices=Price(2.0, 8.0))
    factory = ClientPolicyFactory(client)
    try:
        (result,) = await run_episodes(lambda: ares.make("humaneval", tasks="0:1"), factory, episodes=1)
    finally:
        await factory.aclose()
    assert result.reward == 1.0 and result.steps == 2 and len(fake.received) == 2
    assert result.cost_usd == pytest.approx(2 * (500 * 2.0 + 100 * 8.0) / 1e6)
    assert fake.received[0].body["messages"][0]["role"] == "system"


async def _ares(*args: str, env: dict[str, str]) -> tuple[int, str]:
    exe = shutil.which("ares", path=str(Path(sys.executable).parent))
    cmd = [exe] if exe else [sys.executable, "-m", "ares.cli.main"]
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    proc = await asyncio.create_subprocess_exec(
        *cmd, *args, env={**clean, **env}, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 240)
    return proc.returncode or 0, out.decode()


SUBMIT = LLMResponse(content="Done.\n```bash\necho ARES_SUBMIT\n```", usage=Usage(10, 5))
SUBMITS: dict[str, Callable[[LLMResponse], dict[str, Any]]] = {
    CHAT_PATH: response_to_openai,
    RESPONSES_PATH: response_to_responses,
    MESSAGES_PATH: response_to_anthropic,
}


@VENDORS
async def test_cli_options_reach_the_sdk_policies(vendor: Vendor, fake: FakeVendors, tmp_path: Path) -> None:
    fake.then(Reply(body=SUBMITS[vendor.path](SUBMIT)))
    code, out = await _ares(
        "run", "humaneval", "-p", vendor.name, "--base-url", vendor.url(fake), "--model", "m", "--tasks", "0",
        "--max-tokens", "77", "--temperature", "0.25", "--timeout", "30", "--api-key-env", "MY_LLM_KEY",
        "--out", str(tmp_path), env={"MY_LLM_KEY": "sk-mine", vendor.client.key_env: "sk-not-this-one"},
    )  # fmt: skip
    assert code == 0, out
    [sent] = fake.received
    assert sent.path == vendor.path and sent.headers["authorization"] == "Bearer sk-mine"
    assert (sent.body["model"], sent.body[vendor.max_tokens_key], sent.body["temperature"]) == ("m", 77, 0.25)
    assert "10 prompt, 5 completion" in out


async def test_cli_anthropic_without_a_key_is_a_configuration_error() -> None:
    code, out = await _ares("run", "humaneval", "-p", "anthropic", "--model", "claude-x", env={})
    assert code == 2 and "set ANTHROPIC_API_KEY" in out
