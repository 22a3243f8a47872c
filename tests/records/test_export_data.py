"""Realistic recorded episodes for the export tests, written the way collectors write them."""

from __future__ import annotations

from pathlib import Path

from ares.llm.types import LLMRequest, LLMResponse, Message, Usage, system, user
from ares.records import EpisodeRecord, JsonDirCollector, StepRecord, load_episodes

SYSTEM = "You are a coding agent. Reply with one ```bash block per turn; echo ARES_SUBMIT when done."
REPLIES = (
    "Let me look around.\n```bash\nls /workspace\n```",
    "I'll write the solution.\n```bash\nprintf 'def add(a, b):\\n    return a + b\\n' "
    "> /workspace/sol.py\n```",
    "Done.\n```bash\necho ARES_SUBMIT\n```",
)
COMMANDS = (
    "ls /workspace",
    "printf 'def add(a, b):\\n    return a + b\\n' > /workspace/sol.py",
    "echo ARES_SUBMIT",
)
OUTPUTS = ("sol.py\ntests\n", "", "ARES_SUBMIT\n")


def make_episode(
    episode_id: str, reward: float, status: str = "finished", level: str = "full"
) -> EpisodeRecord:
    """A three-turn bash-agent episode with per-step traces and the verifier's final reward."""
    t = 1_700_000_000.0 + sum(map(ord, episode_id))
    task = user(f"Task {episode_id}: implement add(a, b) in /workspace/sol.py.")
    prompt = LLMRequest(
        messages=(task,), system_prompt=SYSTEM, model="test-model", prompt_token_ids=(1, 2, 3)
    )
    steps = [StepRecord(0, "FIRST", prompt, None, None, None, t, t + 0.01)]
    history: tuple[Message, ...] = (task,)
    for i, (reply, cmd, out) in enumerate(zip(REPLIES, COMMANDS, OUTPUTS, strict=True), start=1):
        action = LLMResponse(
            content=reply, usage=Usage(100 * i, 20), cost=0.001, model="test-model", id=f"chatcmpl-{i}",
            token_ids=(7, 8, 9), logprobs=(-0.5, -0.25, -0.125),
        )  # fmt: skip
        last = i == len(REPLIES)
        history = (*history, action.message())
        observation = None
        if not last:
            history = (*history, user(f"exit code 0\n<output>\n{out}</output>"))
            observation = LLMRequest(messages=history, system_prompt=SYSTEM, model="test-model")
        command = {"cmd": cmd, "cwd": "/workspace", "exit_code": 0, "timed_out": False, "limit_hit": None,
                   "duration_s": 0.05}  # fmt: skip
        if level == "full":
            command |= {"stdout": out, "stderr": ""}
        step_reward = reward if last else 0.0
        trace = {
            "level": level,
            "prompt": [{"role": "system", "content": SYSTEM}],
            "response": {"role": "assistant", "content": reply},
            "reward": {"reward": step_reward, "discount": 0.0 if last else 1.0, "terms": {}},
            "env_state": {"commands": [command]},
            "extra": {},
        }
        steps.append(
            StepRecord(
                i,
                "LAST" if last else "MID",
                observation,
                action,
                step_reward,
                0.0 if last else 1.0,
                t + i,
                t + i + 0.5,
                trace,
            )
        )
    return EpisodeRecord(
        episode_id=episode_id, task_id=f"humaneval_{episode_id}", seed=0, env={"preset": "humaneval"},
        started_at=t, ended_at=t + 10, status=status, total_reward=reward, steps=tuple(steps),
        metadata={"episode": {"status": status, "reward": reward, "verifier_stdout": "1 passed"}},
    )  # fmt: skip


def write_run(directory: Path) -> list[EpisodeRecord]:
    """A run dir like ``ares run --out``: passing, failing and errored episodes under trajectories/."""
    episodes = [
        make_episode("ep-pass", 1.0),
        make_episode("ep-half", 0.5, level="basic"),
        make_episode("ep-fail", 0.0),
        make_episode("ep-error", 1.0, status="errored"),
    ]
    collector = JsonDirCollector(directory / "trajectories")
    for episode in episodes:
        collector.begin_episode(
            EpisodeRecord(episode.episode_id, episode.task_id, 0, episode.env, episode.started_at)
        )
        for step in episode.steps:
            collector.record_step(episode.episode_id, step)
        collector.end_episode(
            episode.episode_id, status=episode.status, ended_at=episode.ended_at,
            total_reward=episode.total_reward, metadata=dict(episode.metadata),
        )  # fmt: skip
    collector.close()
    return episodes


def test_written_run_reads_back_as_the_same_episodes(tmp_path: Path) -> None:
    written = write_run(tmp_path)
    loaded = load_episodes(tmp_path / "trajectories")
    assert sorted(e.to_json()["episode_id"] for e in loaded) == sorted(e.episode_id for e in written)
    by_id = {e.episode_id: e for e in loaded}
    assert all(by_id[e.episode_id].to_json() == e.to_json() for e in written)
    assert isinstance(system(SYSTEM), Message)
