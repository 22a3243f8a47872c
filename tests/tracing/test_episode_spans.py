"""A real HumanEval episode (local sandbox, oracle policy) traced at basic and full."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

import ares
from ares import tracing
from ares.llm.openai_client import OpenAIChatClient
from ares.llm.types import LLMRequest, user
from ares.policies import make_policy
from ares.policies.openai import OpenAIPolicy
from ares.records.collectors import JsonDirCollector
from ares.rollout.runner import run_episodes
from ares.sandbox.base import ExecResult
from ares.sandbox.lifecycle import StartStopContext
from conftest import by_name, inside, slices, track_names
from fake_openai import FakeOpenAI


async def traced_episode(level: tracing.Level, out: Path) -> list[dict]:
    tracing.configure(level, process="driver")
    with tracing.span("test.episode", cat="test", track="episode 0"):
        (result,) = await run_episodes(
            lambda: ares.make("humaneval", tasks="0:1"), make_policy("oracle"), episodes=1,
            collector=JsonDirCollector(out),
        )  # fmt: skip
    assert result.reward == 1.0
    return tracing.drain()


def episode_track(events: list[dict]) -> tuple[int, int]:
    """The one track every env, agent and sandbox span of the episode is on; named "episode ..."."""
    ours = [e for e in slices(events) if e["cat"] in ("env", "agent", "sandbox")]
    tracks = {(e["pid"], e["tid"]) for e in ours}
    assert len(tracks) == 1, tracks
    (track,) = tracks
    assert track_names(events)[track].startswith("episode ")
    return track


async def test_basic_has_the_episode_lifecycle_on_its_track(tmp_path: Path) -> None:
    events = await traced_episode("basic", tmp_path)
    episode_track(events)
    names = {e["name"] for e in slices(events)}
    assert {"env.reset", "env.step", "env.verify", "agent.start", "sandbox.start", "sandbox.stop"} <= names
    assert not names & {"sandbox.exec", "sandbox.upload", "agent.turn", "records.write"}  # full only
    (reset,), (verify,) = by_name(events, "env.reset"), by_name(events, "env.verify")
    steps = by_name(events, "env.step")
    assert len(steps) == 2 and [s["args"]["step"] for s in steps] == [1, 2]
    assert reset["args"]["task"] == "humaneval_0" and verify["args"]["reward"] == 1.0
    starts = by_name(events, "sandbox.start")
    assert any(inside(s, reset) for s in starts)  # the agent's sandbox
    assert any(inside(s, verify) for s in starts)  # the verifier's own
    assert inside(verify, steps[-1])
    assert all(s["args"]["backend"] == "LocalSandbox" for s in starts)


async def test_full_adds_commands_agent_turns_and_record_writes(tmp_path: Path) -> None:
    events = await traced_episode("full", tmp_path)
    track = episode_track(events)
    (verify,), steps = by_name(events, "env.verify"), by_name(events, "env.step")
    turns = by_name(events, "agent.turn")
    assert len(turns) == 2 and all(any(inside(t, s) for s in steps) for t in turns)
    assert turns[-1]["args"] == {"agent_finished": True}  # the agent ending is no error
    execs = by_name(events, "sandbox.exec")
    oracle = [e for e in execs if any(inside(e, t) for t in turns)]
    assert oracle and all(e["args"]["exit_code"] == 0 for e in oracle)
    (tests,) = [e for e in execs if e["args"]["cmd"] == "bash /tests/test.sh"]
    assert inside(tests, verify)
    writes = by_name(events, "records.write")
    assert writes and all((w["pid"], w["tid"]) != track for w in writes)  # the writer thread's own track


@pytest.fixture
def llm_server() -> Iterator[str]:
    server = FakeOpenAI()
    server.start()
    yield server.base_url
    server.stop()


async def test_policy_http_span_at_full(llm_server: str) -> None:
    client = OpenAIChatClient(base_url=llm_server, model="m", max_retries=0)
    policy = OpenAIPolicy(client)
    tracing.configure("basic", process="driver")
    await policy.act(LLMRequest(messages=(user("hello"),)))
    assert by_name(tracing.drain(), "policy.http") == []
    tracing.configure("full", process="driver")
    response = await policy.act(LLMRequest(messages=(user("hello"),)))
    await client.aclose()
    assert response.tool_calls[0].name == "bash"  # the fake server's canned completion
    (span,) = by_name(tracing.drain(), "policy.http")
    assert span["cat"] == "policy" and span["args"]["model"] == "m"


async def test_sandbox_spans_follow_the_level_whenever_the_backend_class_was_made() -> None:
    """The span wrappers sit on a backend class only while tracing records their level: a class
    made while tracing is off records once it is on, and is back to its own methods once off."""

    class Quick(StartStopContext):
        async def start(self) -> None:
            return None

        async def stop(self) -> None:
            return None

        async def exec(self, cmd: str, **_: object) -> ExecResult:
            return ExecResult(cmd, "", 0, False, 0.0)

    written = Quick.__dict__["_ares_traced_ops"]
    assert Quick.__dict__["exec"] is written["exec"][0]  # off: the method as written, no wrapper
    tracing.configure("basic", process="levels")
    assert Quick.__dict__["start"] is written["start"][1] and Quick.__dict__["exec"] is written["exec"][0]
    tracing.configure("full", process="levels")
    async with Quick() as sandbox:
        assert (await sandbox.exec("echo hi")).stdout == "echo hi"
    names = [e["name"] for e in slices(tracing.drain())]
    assert sorted(names) == ["sandbox.exec", "sandbox.start", "sandbox.stop"]
    tracing.shutdown()
    assert all(Quick.__dict__[op] is own for op, (own, _) in written.items())
    async with Quick() as sandbox:
        await sandbox.exec("true")
    assert tracing.drain() == []


async def test_a_cancelled_step_ends_its_span_errored(tmp_path: Path) -> None:
    """step() opens and closes its span by hand (no ``with`` on the hot path): an exception escaping
    the step still ends the span, marked with the error."""
    tracing.configure("basic", process="driver")
    env = ares.make("humaneval", tasks="0:1")
    async with env:
        await env.reset(task=0)
        stepping = asyncio.ensure_future(env.step(env.action_format.command("sleep 30")))
        await asyncio.sleep(0.5)
        stepping.cancel()
        with pytest.raises(asyncio.CancelledError):
            await stepping
    (step,) = by_name(tracing.drain(), "env.step")
    assert step["args"]["error"] == "CancelledError"
