"""What a long run holds: nothing of an ended episode is kept by the runner or a shared collector
(weak references die), and ``keep_records=False`` results carry no episode dict."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path
from typing import Any

from ares.core.status import EpisodeStatus
from ares.envs.code_env import CodeEnvironment
from ares.llm.interceptor import LLMClient
from ares.llm.types import LLMRequest, LLMResponse, Message
from ares.records import JsonlCollector
from ares.records.loader import load_episodes
from ares.rollout.results import EpisodeResult, RunSummary
from ares.rollout.runner import run_episodes
from ares.sandbox.base import ExecResult, SandboxSpec
from ares.tasks.model import Task
from weak_tracked import TrackedMessage, TrackedRequest, TrackedResponse

#: The double below cannot fork a sandbox for the tests, so the task asks for in-place verification.
TASK = Task(id="chat", instruction="say hi", tests={"test.sh": "exit 0"}, verifier_mode="in-place")


class DoneSandbox:
    """A sandbox double: every command succeeds and the verifier finds reward 1."""

    def __init__(self, spec: SandboxSpec) -> None:
        self.spec = spec

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def exec(self, cmd: str, **_: Any) -> ExecResult:
        return ExecResult("1\n" if cmd.endswith("reward.txt") else "", "", 0, False, 0.0)

    async def upload(self, src: Any, dest: str) -> None:
        pass

    async def download(self, src: str, dest: Path) -> None:
        dest.mkdir(parents=True, exist_ok=True)
        (dest / "reward.txt").write_text("1\n")

    async def read_file(self, path: str) -> bytes:
        return b"1\n"

    async def __aenter__(self) -> DoneSandbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass


REFS: list[weakref.ref[Any]] = []


class ChatAgent:
    """Three turns of a growing conversation; every request and message is weakly tracked."""

    def __init__(self, llm: LLMClient) -> None:
        self.llm = llm

    async def run(self) -> None:
        history: tuple[Message, ...] = (TrackedMessage("user", "say hi"),)
        for _ in range(3):
            request = TrackedRequest(messages=history, system_prompt="sys")
            REFS.extend(weakref.ref(x) for x in (request, *history))
            response = await self.llm(request)
            history = (*history, TrackedMessage("assistant", response.content), TrackedMessage("user", "ok"))


class Format:
    def command(self, command: str) -> LLMResponse:
        return TrackedResponse(content=command)

    def submit(self) -> LLMResponse:
        return TrackedResponse(content="done")


class ChatAgentFactory:
    action_format = Format()

    def __call__(self, *, sandbox: Any, llm: LLMClient, task: Task) -> ChatAgent:
        return ChatAgent(llm)


class FreshAnswers:
    async def act(self, observation: LLMRequest) -> LLMResponse:
        response = TrackedResponse(content="hi")
        REFS.append(weakref.ref(response))
        return response


def chat_env() -> CodeEnvironment:
    return CodeEnvironment([TASK], agent_factory=ChatAgentFactory(), sandbox_factory=DoneSandbox)


async def test_nothing_of_ended_episodes_outlives_the_run_in_a_shared_collector(tmp_path: Path) -> None:
    REFS.clear()
    collector = JsonlCollector(tmp_path / "t.jsonl")
    with collector:  # shared by the run and still open afterwards, as a trainer's would be
        results = await run_episodes(
            chat_env, lambda task, fmt: FreshAnswers(), episodes=40, concurrency=4, collector=collector,
            trace="full", keep_records=False,
        )  # fmt: skip
        collector.flush()
        gc.collect()
        assert len(REFS) > 40 * 4
        assert [r for r in REFS if r() is not None] == []
        assert collector.open_episodes == 0
    assert [r.status for r in results] == [EpisodeStatus.FINISHED] * 40
    assert len(load_episodes(tmp_path / "t.jsonl")) == 40


async def test_compact_results_drop_the_record_after_on_result_saw_it() -> None:
    seen: list[EpisodeResult] = []
    policy = lambda task, fmt: FreshAnswers()  # noqa: E731
    full = await run_episodes(chat_env, policy, episodes=6, concurrency=3)
    compact = await run_episodes(
        chat_env, policy, episodes=6, concurrency=3, on_result=seen.append, keep_records=False
    )
    assert all(r.record for r in full) and all(r.record == {} for r in compact)
    assert sorted(r.record["status"] for r in seen) == ["finished"] * 6  # on_result got it whole
    assert [(r.index, r.status, r.reward, r.steps) for r in compact] == [
        (r.index, r.status, r.reward, r.steps) for r in full
    ]
    one, other = RunSummary.of(full, 1.0), RunSummary.of(compact, 1.0)
    assert (one.episodes, one.pass_rate, one.statuses, one.mean_steps) == (
        other.episodes, other.pass_rate, other.statuses, other.mean_steps,
    )  # fmt: skip
    assert EpisodeResult.from_dict(compact[0].to_dict()).status is EpisodeStatus.FINISHED


async def test_compact_results_with_branched_groups() -> None:
    seen: list[EpisodeResult] = []
    results = await run_episodes(
        chat_env, lambda task, fmt: FreshAnswers(), episodes=4, group_size=2, branch_at=0,
        on_result=seen.append, keep_records=False,
    )  # fmt: skip
    # This sandbox double cannot fork: each group ends errored at its prefix, its error kept apart.
    assert [r.index for r in results] == [r.index for r in seen] == [0, 2]
    assert all(r.record == {} and r.error is not None for r in results) and all(r.record for r in seen)
