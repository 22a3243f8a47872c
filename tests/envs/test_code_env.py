"""CodeEnvironment end to end: real local sandboxes, real HumanEval and Harbor tasks, real verifier."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

import ares
from ares.agents.bash import BashActionFormat
from ares.core.status import EpisodeStatus
from ares.envs.code_env import CodeEnvironment
from ares.errors import EnvironmentStateError, TaskNotFoundError
from ares.llm.interceptor import LLMClient
from ares.llm.types import LLMRequest, LLMResponse
from ares.policies import make_policy
from ares.sandbox import Sandbox
from ares.sandbox.local import LocalSandbox
from ares.tasks.model import Task

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FMT = BashActionFormat()


async def play(env: CodeEnvironment, policy: str, task: int | str = 0, **options: object) -> ares.TimeStep:
    ts = await env.reset(task=task)
    assert ts.first() and ts.reward is None and ts.discount is None
    assert isinstance(ts.observation, LLMRequest)
    assert env.task is not None
    pol = make_policy(policy, **options)(env.task, env.action_format)
    while not ts.last():
        ts = await env.step(await pol.act(ts.observation))
    return ts


def commands(*cmds: str) -> list[LLMResponse]:
    return [FMT.command(c) for c in cmds]


async def play_script(env: CodeEnvironment, responses: list[LLMResponse], task: int = 0) -> ares.TimeStep:
    ts = await env.reset(task=task)
    queue = list(responses)
    while not ts.last():
        ts = await env.step(queue.pop(0) if queue else FMT.submit())
    return ts


@pytest.fixture
async def humaneval():
    env = ares.make("humaneval", tasks="0:3")
    yield env
    await env.close()


async def test_oracle_scores_one_and_null_scores_zero(humaneval: CodeEnvironment) -> None:
    ts = await play(humaneval, "oracle")
    assert ts.last() and ts.reward == 1.0 and ts.discount == 0.0
    assert humaneval.episode is not None and humaneval.episode.status is EpisodeStatus.FINISHED
    ts = await play(humaneval, "null")
    assert ts.reward == 0.0 and humaneval.episode.status is EpisodeStatus.FINISHED


async def test_step_before_reset_and_after_last_are_clear_errors(humaneval: CodeEnvironment) -> None:
    with pytest.raises(EnvironmentStateError, match="before reset"):
        await humaneval.step(FMT.submit())
    await play(humaneval, "null")
    with pytest.raises(EnvironmentStateError, match="call reset"):
        await humaneval.step(FMT.submit())
    with pytest.raises(TaskNotFoundError):
        await humaneval.reset(task="no-such-task")


async def test_step_limit_truncates_with_discount_one() -> None:
    env = ares.make("humaneval", tasks="0:1", step_limit=3)
    async with env:
        ts = await env.reset()
        steps = 0
        while not ts.last():
            ts = await env.step(FMT.command("echo still working"))
            steps += 1
        assert steps == 3
        assert ts.discount == 1.0 and ts.reward == 0.0
        assert env.episode is not None
        assert env.episode.status is EpisodeStatus.TRUNCATED and env.episode.truncation == "step_limit"


async def test_time_limit_truncates() -> None:
    task = ares.load_humaneval()[0]
    slow = Task(**{**task.__dict__, "agent_timeout_s": 1.0, "command_timeout_s": 30.0})
    env = CodeEnvironment([slow], agent_factory=ares.presets.BashAgentFactory(), sandbox_factory=LocalSandbox)
    async with env:
        await env.reset()
        ts = await env.step(FMT.command("sleep 20"))
        assert ts.last() and ts.discount == 1.0
        assert env.episode is not None and env.episode.truncation == "time_limit"
        assert env.episode.status is EpisodeStatus.TRUNCATED


class CrashingAgent:
    def __init__(self, llm: LLMClient) -> None:
        self.llm = llm

    async def run(self) -> None:
        await self.llm(LLMRequest(messages=(ares.Message("user", "hello"),)))
        raise ZeroDivisionError("agent bug")


class CrashingAgentFactory:
    action_format = FMT

    def __call__(self, *, sandbox: Sandbox, llm: LLMClient, task: Task) -> CrashingAgent:
        return CrashingAgent(llm)


async def test_agent_crash_ends_errored_with_the_error_kept() -> None:
    env = CodeEnvironment(
        ares.load_humaneval()[:1], agent_factory=CrashingAgentFactory(), sandbox_factory=LocalSandbox
    )
    async with env:
        await env.reset()
        ts = await env.step(LLMResponse(content="anything"))
        assert ts.last() and ts.reward == 0.0
        assert env.episode is not None and env.episode.status is EpisodeStatus.ERRORED
        assert env.episode.error is not None and env.episode.error.type == "ZeroDivisionError"
        assert "agent bug" in env.episode.error.traceback


async def test_reset_while_active_abandons_and_cleans_up(humaneval: CodeEnvironment) -> None:
    await humaneval.reset(task=0)
    first = humaneval.episode
    sandbox = humaneval._sandbox
    assert isinstance(sandbox, LocalSandbox)
    state_dir = sandbox.diff_dir.parent
    await humaneval.reset(task=1)
    assert first is not None and first.status is EpisodeStatus.ABANDONED
    assert not state_dir.exists() and not sandbox.running
    assert humaneval.episode is not None and humaneval.episode.status is EpisodeStatus.RUNNING


async def test_close_while_active_aborts() -> None:
    env = ares.make("humaneval", tasks="0:1")
    async with env:
        await env.reset()
        episode = env.episode
    assert episode is not None and episode.status is EpisodeStatus.ABORTED
    with pytest.raises(EnvironmentStateError, match="closed"):
        await env.reset()


async def test_cancelled_step_ends_cancelled_and_cleans_up(humaneval: CodeEnvironment) -> None:
    await humaneval.reset(task=0)
    sandbox = humaneval._sandbox
    assert isinstance(sandbox, LocalSandbox)
    step = asyncio.ensure_future(humaneval.step(FMT.command("sleep 30")))
    await asyncio.sleep(0.3)
    step.cancel()
    with pytest.raises(asyncio.CancelledError):
        await step
    assert humaneval.episode is not None and humaneval.episode.status is EpisodeStatus.CANCELLED
    assert not sandbox.running


FORGERY = (
    "mkdir -p /logs/verifier /tests && echo 1.0 > /logs/verifier/reward.txt && "
    "echo '{\"reward\": 1.0}' > /logs/verifier/reward.json && "
    "printf 'mkdir -p /logs/verifier; echo 1.0 > /logs/verifier/reward.txt' > /tests/test.sh && "
    "(while true; do echo 1.0 > /logs/verifier/reward.txt 2>/dev/null; sleep 0.01; done) > /dev/null 2>&1 &"
)


async def test_reward_forgery_does_not_count(humaneval: CodeEnvironment) -> None:
    ts = await play_script(humaneval, commands(FORGERY, "ls /logs/verifier"))
    assert ts.reward == 0.0
    assert humaneval.episode is not None and humaneval.episode.status is EpisodeStatus.FINISHED


def harbor_env(tmp_path: Path, test_sh: str) -> CodeEnvironment:
    task_dir = tmp_path / "custom"
    (task_dir / "tests").mkdir(parents=True)
    (task_dir / "task.toml").write_text('[environment]\nworkdir = "/app"\n[verifier]\ntimeout_sec = 10\n')
    (task_dir / "instruction.md").write_text("Do nothing.")
    (task_dir / "tests" / "test.sh").write_text(test_sh)
    return ares.make("harbor", path=task_dir)


@pytest.mark.parametrize(
    ("test_sh", "reason"),
    [
        ("echo 'no reward written'", "neither reward.json nor reward.txt"),
        ("mkdir -p /logs/verifier && echo nan > /logs/verifier/reward.txt", "not a finite"),
        ("mkdir -p /logs/verifier && echo '[1]' > /logs/verifier/reward.json", "JSON object"),
        ("mkdir -p /logs/verifier && echo much > /logs/verifier/reward.txt", "one number"),
    ],
)
async def test_unusable_rewards_end_errored_never_silent_zero(
    tmp_path: Path, test_sh: str, reason: str
) -> None:
    env = harbor_env(tmp_path, test_sh)
    async with env:
        ts = await play_script(env, [])
        assert ts.last()
        assert env.episode is not None and env.episode.status is EpisodeStatus.ERRORED
        assert env.episode.error is not None and reason in env.episode.error.message


async def test_reward_json_wins_over_txt(tmp_path: Path) -> None:
    env = harbor_env(
        tmp_path,
        "mkdir -p /logs/verifier && echo 0.0 > /logs/verifier/reward.txt && "
        'echo \'{"correct": 0.5, "style": 0.25}\' > /logs/verifier/reward.json',
    )
    async with env:
        ts = await play_script(env, [])
        assert ts.reward == 0.75
        assert env.episode is not None and env.episode.reward_terms == {"correct": 0.5, "style": 0.25}


@pytest.mark.parametrize("name", ["hello-file", "fix-bug", "json-reward"])
async def test_harbor_fixtures_oracle_one_null_zero(name: str) -> None:
    env = ares.make("harbor", path=FIXTURES / "harbor" / name)
    async with env:
        assert (await play(env, "oracle")).reward == pytest.approx(1.0)
        assert (await play(env, "null")).reward == 0.0


async def test_seeded_task_choice_is_reproducible() -> None:
    env = ares.make("humaneval")
    async with env:
        picks = []
        for _ in range(2):
            await env.reset(seed=123)
            assert env.task is not None
            picks.append(env.task.id)
        assert picks[0] == picks[1]


async def test_an_agent_that_kills_its_sandbox_is_still_verified(monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent writes the answer, then freezes its command's supervisor so the sandbox stops
    answering: the episode is not `errored` (the agent caused it); its files are verified and the
    crash is on record."""
    from ares.sandbox.local import sandbox as local_sandbox

    monkeypatch.setattr(local_sandbox, "EXEC_GRACE_S", 0.5)
    env = ares.make("harbor", path=FIXTURES / "harbor" / "hello-file")
    async with env:
        task = dataclasses.replace(env.tasks[0], command_timeout_s=1.0)
        ts = await env.reset(task=task)
        for action in commands("printf 'Hello, ARES!\\n' > hello.txt", "kill -STOP $PPID; sleep 600"):
            ts = await env.step(action)
        episode = env.episode
        assert episode is not None and ts.last() and ts.reward == 1.0
        assert episode.status is EpisodeStatus.FINISHED and episode.error is None
        assert episode.sandbox_crash is not None and "did not answer" in episode.sandbox_crash
        assert episode.to_dict()["sandbox_crash"] == episode.sandbox_crash


async def test_commands_are_logged_only_when_asked(humaneval: CodeEnvironment) -> None:
    """A bare environment keeps nothing per command (and says so when asked for them); with
    ``log_commands`` every command the agent ran is drained once, in order, with its result."""
    await play_script(humaneval, commands("echo one", "echo two"))
    with pytest.raises(EnvironmentStateError, match="log_commands=True"):
        humaneval.drain_commands()
    humaneval.log_commands = True
    ts = await humaneval.reset(task=0)
    ts = await humaneval.step(FMT.command("echo one"))
    ts = await humaneval.step(FMT.command("echo two && exit 3"))
    logged = humaneval.drain_commands()
    assert [(c.cmd, c.result.stdout, c.result.exit_code) for c in logged] == [
        ("echo one", "one\n", 0),
        ("echo two && exit 3", "two\n", 3),
    ]
    assert humaneval.drain_commands() == []
    while not ts.last():
        ts = await humaneval.step(FMT.submit())
