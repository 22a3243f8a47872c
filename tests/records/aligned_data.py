"""Episode records in the shape the recorder writes them (aligned traces), and alignment checks.

Every observation and action has distinct text, and each observation repeats the conversation so far
(as a CodeEnvironment's does), so a pair built from the wrong observation shows: either the prompt's
last user message is another step's output, or the prompt already holds the completion (a leak).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ares.llm.types import LLMRequest, LLMResponse, Message, Usage, user
from ares.records import EpisodeRecord, ErrorRecord, StepRecord
from ares.records.rollout_trace import prompt_messages, response_message

SYSTEM = "You are a coding agent. Reply with one ```bash block per turn."
TOOLS = ({"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}},)
T0 = 1_700_000_000.0


def task_text(episode_id: str) -> str:
    return f"Task of {episode_id}: make the tests pass."


def reply_text(episode_id: str, k: int) -> str:
    return f"[{episode_id}] reply {k}\n```bash\necho step-{k}\n```"


def output_text(episode_id: str, k: int) -> str:
    return f"[{episode_id}] output of step {k}: step-{k}"


def episode(
    episode_id: str,
    *,
    replies: int = 3,
    reward: float | None = 1.0,
    status: str = "finished",
    group_id: str | None = "group-0",
    exit_reason: str | None = "submitted",
    old_traces: bool = False,
    traced: bool = True,
    last_observation: bool = False,
    error: ErrorRecord | None = None,
    seed: int | None = 0,
) -> EpisodeRecord:
    """A ``replies``-turn episode recorded the way the collecting wrapper records it.

    ``old_traces``: traces as written before the fix (the prompt is the step's own observation, the
    *next* prompt). ``last_observation``: the LAST step returns an observation (most environments'
    do; a CodeEnvironment's does not)."""
    t = T0 + sum(map(ord, episode_id))
    history: tuple[Message, ...] = (user(task_text(episode_id)),)
    first = LLMRequest(history, SYSTEM, tools=TOOLS, model="m", prompt_token_ids=(1, 2, 3))
    steps = [StepRecord(0, "FIRST", first, None, None, None, t, t + 0.01, _trace(None, None, None, {}))]
    previous: LLMRequest = first
    for k in range(1, replies + 1):
        last = k == replies
        action = LLMResponse(
            content=reply_text(episode_id, k), usage=Usage(100 * k, 10 + k), cost=0.001 * k, model="m",
            token_ids=(k, k + 1), logprobs=(-0.1 * k, -0.2 * k),
        )  # fmt: skip
        history = (*history, action.message(), user(output_text(episode_id, k)))
        observation = None
        if not last or last_observation:
            ids = tuple(range(3 + 5 * k))
            observation = LLMRequest(history, SYSTEM, tools=TOOLS, model="m", prompt_token_ids=ids)
        step_reward = (reward if last else 0.0) if reward is not None else None
        policy = {"latency_s": 0.5 * k, "prompt_tokens": 100 * k, "completion_tokens": 10 + k,
                  "cost_usd": 0.001 * k}  # fmt: skip
        prompt = observation if old_traces else previous
        trace = _trace(prompt, action, step_reward, {"policy": policy}) if traced else None
        kind = "LAST" if last else "MID"
        discount = 0.0 if last else 1.0
        steps.append(
            StepRecord(k, kind, observation, action, step_reward, discount, t + k, t + k + 0.5, trace)
        )
        if observation is not None:
            previous = observation
    summary = {
        "status": status, "reward": reward, "exit_reason": exit_reason, "policy_latency_s": 0.5 * sum(
            range(1, replies + 1)), "prompt_tokens": sum(100 * k for k in range(1, replies + 1)),
        "completion_tokens": sum(10 + k for k in range(1, replies + 1)),
        "cost_usd": sum(0.001 * k for k in range(1, replies + 1)),
        "error": None if error is None else {"type": error.type, "message": error.message, "traceback": None},
    }  # fmt: skip
    metadata: dict[str, Any] = {"trace": "basic", "episode": summary}
    if group_id is not None:
        metadata["group_id"] = group_id
    return EpisodeRecord(
        episode_id=episode_id, task_id=f"task-{episode_id}", seed=seed, env={"class": "Fake", "name": "fake"},
        started_at=t, ended_at=t + replies + 1, status=status, total_reward=reward, error=error,
        steps=tuple(steps), metadata=metadata,
    )  # fmt: skip


def _trace(prompt: Any, action: Any, reward: float | None, extra: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "level": "basic",
        "prompt": prompt_messages(prompt),
        "response": response_message(action),
        "reward": {"reward": reward, "discount": None, "terms": {}},
        "env_state": {"commands": []},
        "extra": dict(extra),
    }


def write_records(episodes: Iterable[EpisodeRecord], collector: Any) -> None:
    """Hand ``episodes`` to a collector event by event, as the collecting wrapper does; closes it."""
    for e in episodes:
        head = {k: v for k, v in e.metadata.items() if k != "episode"}
        collector.begin_episode(
            EpisodeRecord(e.episode_id, e.task_id, e.seed, e.env, e.started_at, metadata=head)
        )
        for step in e.steps:
            collector.record_step(e.episode_id, step)
        tail = {"episode": e.metadata["episode"]} if "episode" in e.metadata else {}
        collector.end_episode(
            e.episode_id, status=e.status, ended_at=e.ended_at or e.started_at, total_reward=e.total_reward,
            error=e.error, truncation=e.truncation, metadata=tail,
        )  # fmt: skip
    collector.close()


# --- what aligned means ----------------------------------------------------------------------------


def expected_pairs(e: EpisodeRecord) -> list[tuple[str, str]]:
    """Per decision, from the steps themselves: (the last user message of the observation the action
    answered, the action's text)."""
    pairs = []
    for k, step in enumerate(e.steps):
        if isinstance(step.action, LLMResponse):
            answered = e.steps[k - 1].observation
            assert isinstance(answered, LLMRequest)
            pairs.append((last_user(answered.chat()), step.action.content or ""))
    return pairs


def last_user(messages: Sequence[Any]) -> str:
    """The text of the last user message of a list of ``Message``s or OpenAI message dicts."""
    for m in reversed(list(messages)):
        role = m.role if isinstance(m, Message) else m["role"]
        if role == "user":
            content = m.text if isinstance(m, Message) else m["content"]
            return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
    raise AssertionError("no user message in the prompt")


def assert_aligned(
    e: EpisodeRecord, prompts: Sequence[Sequence[Mapping[str, Any]]], completions: Sequence[str]
) -> None:
    """Row t's prompt ends with the observation that preceded action t, and its completion is action
    t's text, which the prompt does not already hold (for agents that keep the whole history)."""
    pairs = expected_pairs(e)
    assert len(pairs) == len(prompts) == len(completions), (len(pairs), len(prompts), len(completions))
    for t, ((answered, action), prompt, completion) in enumerate(
        zip(pairs, prompts, completions, strict=True)
    ):
        assert last_user(prompt) == answered, f"turn {t}: prompt ends with {last_user(prompt)!r}"
        assert completion == action, f"turn {t}: completion {completion!r} is not action {t}"
        # the prompt holds the t earlier replies, not this one (which a shifted pair would leak)
        replies = [m for m in prompt if m["role"] == "assistant"]
        assert len(replies) == t, f"turn {t}: the prompt holds {len(replies)} replies"
        assert all(m.get("content") != action for m in replies), f"turn {t}: the prompt holds its completion"


def write_json(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path
