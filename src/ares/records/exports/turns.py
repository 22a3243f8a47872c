"""The turn view: one row per policy decision, the prompt the policy saw next to the answer it gave.

A ``StepRecord`` pairs an action with the observation it *produced*: step k's ``observation`` is what
step k returned, its ``action`` what was passed to step k. The prompt that action answered is
therefore the observation of step k-1. ``turns`` re-pairs them so that nothing downstream shifts:

    turn t = (prompt: observation of step k-1, completion: action of step k)   for every step k
             whose action is an ``LLMResponse``

The pairing is made from observations and actions, not from the rollout trace, so it is right for
every record ARES ever wrote (records written before traces were aligned included) and for records
with ``trace="off"``. Rows (``turn_row``/``turn_rows``; ``TURN_FIELDS`` in order):

- ``episode_id``, ``task_id``, ``group_id``, ``seed``: which episode (``group_id`` when the episode
  was one of k rollouts of a task, else None); ``parent_episode_id``, ``branch_step``: for an episode
  restored or forked from a snapshot, the episode and step it branched from (the run's tree);
- ``turn`` (0, 1, ... within the episode), ``step`` (index of the step whose action is the
  completion), ``prompt_step`` (index of the step whose observation is the prompt: ``step - 1``);
- ``prompt``: the messages the policy saw (OpenAI Chat Completions form, system prompt first);
  ``completion``: the assistant message it answered with; ``tools``: the tools it was offered;
- ``prompt_token_ids``, ``completion_token_ids``, ``logprobs``: when the request/response carry them;
- ``context``: ``"summary"`` when the agent asked the policy to summarize its conversation (a
  compaction, ``ares.agents.context``), ``"compacted"`` on the first prompt after it, else None;
  ``sequence_start``: this turn starts a new training sequence (the first turn, the first after a
  compaction, or a prompt whose ids do not extend the previous prompt + completion), as
  ``ares.training.sequences`` splits;
- ``finish_reason``, ``model``;
- ``reward``: what followed the completion before the next decision (the step's reward; on the last
  turn, the episode's final reward); ``episode_reward`` (on every row); ``last_turn``;
- ``episode_status``, ``exit_reason``, ``truncation``, ``episode_error`` (``"Type: message"``);
- ``policy_latency_s``, ``prompt_tokens``, ``completion_tokens``, ``cost_usd``: what the decision
  cost (from the trace's ``extra["policy"]`` when recorded, else the response's usage and cost);
- ``episode_outcome`` (the verifier's pass/fail), ``episode_blame`` and ``episode_masked``: whether
  a trainer should leave the episode out (``ares.envs.blame``);
- ``policy_version``: the version of the weights that answered; ``requested_version``: the version
  serving when the policy was asked (``StepRecord.call``; None where the runner recorded no call or
  the policy reports none); ``requested_at`` / ``answered_at``: when the prompt was handed to the
  policy and when the answer came back (wall time); ``queue_s``: how long the prompt waited before
  the policy took it (e.g. behind a paused gate during a weight update).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ares.llm.context_marks import CONTEXT_KEY
from ares.llm.openai_chat import message_to_openai
from ares.llm.types import LLMRequest, LLMResponse, Message
from ares.records.model import EpisodeRecord, StepRecord, jsonable

SUCCESS_STATUS = "finished"
Json = dict[str, Any]

TURN_FIELDS = (
    "episode_id", "task_id", "group_id", "parent_episode_id", "branch_step", "seed", "turn", "step",
    "prompt_step", "prompt", "completion", "tools", "prompt_token_ids", "completion_token_ids", "logprobs",
    "context", "sequence_start",
    "finish_reason", "model", "reward", "episode_reward", "last_turn", "episode_status", "exit_reason",
    "truncation", "episode_error", "policy_latency_s", "prompt_tokens", "completion_tokens", "cost_usd",
    "episode_outcome", "episode_blame", "episode_masked", "policy_version", "requested_at", "answered_at",
    "requested_version", "queue_s",
)  # fmt: skip
ACCOUNTING = ("policy_latency_s", "prompt_tokens", "completion_tokens", "cost_usd")


def is_successful(episode: EpisodeRecord) -> bool:
    """Finished normally with a positive reward: the episodes worth imitating."""
    return episode.status == SUCCESS_STATUS and (episode.total_reward or 0.0) > 0.0


def select(
    episodes: Iterable[EpisodeRecord], *, only_successful: bool = False, min_reward: float | None = None
) -> list[EpisodeRecord]:
    """The episodes passing the filters (``min_reward`` treats a missing reward as failing)."""
    kept = []
    for episode in episodes:
        if only_successful and not is_successful(episode):
            continue
        if min_reward is not None and (episode.total_reward is None or episode.total_reward < min_reward):
            continue
        kept.append(episode)
    return kept


@dataclass(frozen=True, slots=True)
class Turn:
    """One policy decision: the prompt it answered, the reply, and the steps that carried them.

    ``step`` carries the reply (its ``action``); ``prompt_step`` is the step before it, whose
    ``observation`` is ``prompt`` (None when that observation is not an ``LLMRequest``). ``reward`` is
    the sum of the rewards from ``step`` up to the next decision (None when none was given).
    """

    index: int
    prompt: LLMRequest | None
    response: LLMResponse
    step: StepRecord
    prompt_step: StepRecord | None
    reward: float | None
    last: bool


def turns(episode: EpisodeRecord) -> Iterator[Turn]:
    """Every step whose action is an LLM response, with the prompt it answered."""
    steps = episode.steps
    decisions = [k for k, s in enumerate(steps) if isinstance(s.action, LLMResponse)]
    for t, k in enumerate(decisions):
        step = steps[k]
        before = steps[k - 1] if k > 0 else None
        prompt = before.observation if before is not None else None
        end = decisions[t + 1] if t + 1 < len(decisions) else len(steps)
        rewards = [s.reward for s in steps[k:end] if s.reward is not None]
        assert isinstance(step.action, LLMResponse)
        yield Turn(
            index=t,
            prompt=prompt if isinstance(prompt, LLMRequest) else None,
            response=step.action,
            step=step,
            prompt_step=before,
            reward=float(sum(rewards)) if rewards else None,
            last=t == len(decisions) - 1,
        )


def first_prompt(episode: EpisodeRecord) -> LLMRequest | None:
    """The observation the episode started from (the task as the agent first saw it)."""
    return next((s.observation for s in episode.steps if isinstance(s.observation, LLMRequest)), None)


def feedback(step: StepRecord) -> tuple[Message, ...]:
    """What the environment told the agent after this step: the messages after the last assistant reply."""
    if not isinstance(step.observation, LLMRequest):
        return ()
    messages = step.observation.messages
    last = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
    return tuple(messages[last + 1 :])


# --- episode facts (on the record, in its metadata, or in the environment's embedded episode) -------


def episode_fact(episode: EpisodeRecord, name: str) -> Any:
    """``name`` from the record itself, its metadata, or the environment's ``metadata["episode"]``."""
    value = getattr(episode, name, None)
    if value is not None:
        return value
    metadata = episode.metadata if isinstance(episode.metadata, Mapping) else {}
    if metadata.get(name) is not None:
        return metadata[name]
    embedded = metadata.get("episode")
    return embedded.get(name) if isinstance(embedded, Mapping) else None


def episode_reward(episode: EpisodeRecord) -> float | None:
    """The episode's reward: the record's total, else the environment's own verdict."""
    if episode.total_reward is not None:
        return float(episode.total_reward)
    embedded = episode.metadata.get("episode") if isinstance(episode.metadata, Mapping) else None
    reward = embedded.get("reward") if isinstance(embedded, Mapping) else None
    return float(reward) if isinstance(reward, int | float) and not isinstance(reward, bool) else None


def episode_error(episode: EpisodeRecord) -> str | None:
    error = episode.error
    if error is None:
        embedded = episode_fact(episode, "error")
        if isinstance(embedded, Mapping) and embedded.get("type"):
            return f"{embedded.get('type')}: {embedded.get('message', '')}"
        return None
    return f"{error.type}: {error.message}"


# --- rows ------------------------------------------------------------------------------------------


def prompt_messages(prompt: LLMRequest | None) -> list[Json] | None:
    """The request's conversation as OpenAI messages, the system prompt first."""
    return None if prompt is None else [message_to_openai(m) for m in prompt.chat()]


def completion_message(response: LLMResponse) -> Json:
    return message_to_openai(response.message())


def accounting(turn: Turn) -> Json:
    """What the decision cost: the trace's ``extra["policy"]`` where recorded, else the response's."""
    trace = turn.step.trace if isinstance(turn.step.trace, Mapping) else {}
    extra = trace.get("extra")
    policy = extra.get("policy") if isinstance(extra, Mapping) else None
    policy = policy if isinstance(policy, Mapping) else {}
    usage, resp = turn.response.usage, turn.response
    fallback = {
        "policy_latency_s": None,
        "prompt_tokens": None if usage is None else usage.prompt_tokens,
        "completion_tokens": None if usage is None else usage.completion_tokens,
        "cost_usd": resp.cost,
    }
    recorded = {
        "policy_latency_s": policy.get("latency_s"),
        "prompt_tokens": policy.get("prompt_tokens"),
        "completion_tokens": policy.get("completion_tokens"),
        "cost_usd": policy.get("cost_usd"),
    }
    return {k: recorded[k] if recorded[k] is not None else fallback[k] for k in ACCOUNTING}


def context_mark(prompt: LLMRequest | None) -> str | None:
    """The prompt's compaction mark: "summary", "compacted" or None."""
    mark = None if prompt is None else prompt.metadata.get(CONTEXT_KEY)
    return mark if isinstance(mark, str) else None


def starts_sequence(turn: Turn, before: Turn | None) -> bool:
    """Whether ``turn`` begins a new token sequence after ``before`` (the previous turn)."""
    if before is None or context_mark(turn.prompt) == "compacted":
        return True
    prompt = None if turn.prompt is None else turn.prompt.prompt_token_ids
    previous = None if before.prompt is None else before.prompt.prompt_token_ids
    completion = before.response.token_ids
    if prompt is None or previous is None or completion is None:
        return False  # a text-only turn: nothing token-exact to split
    head = tuple(previous) + tuple(completion)
    return tuple(prompt[: len(head)]) != head


def turn_row(episode: EpisodeRecord, turn: Turn, before: Turn | None = None) -> Json:
    """One row of the turn view (plain JSON; keys in ``TURN_FIELDS`` order); ``before`` is the
    episode's previous turn (None for its first)."""
    prompt, resp = turn.prompt, turn.response
    row: Json = {
        "episode_id": episode.episode_id,
        "task_id": episode.task_id,
        "group_id": _str_or_none(episode_fact(episode, "group_id")),
        "parent_episode_id": _str_or_none(episode_fact(episode, "parent_episode_id")),
        "branch_step": episode_fact(episode, "branch_step"),
        "seed": episode.seed,
        "turn": turn.index,
        "step": turn.step.index,
        "prompt_step": None if turn.prompt_step is None else turn.prompt_step.index,
        "prompt": prompt_messages(prompt),
        "completion": completion_message(resp),
        "tools": None if prompt is None or not prompt.tools else [jsonable(t) for t in prompt.tools],
        "prompt_token_ids": _listed(None if prompt is None else prompt.prompt_token_ids),
        "completion_token_ids": _listed(resp.token_ids),
        "logprobs": _listed(resp.logprobs),
        "context": context_mark(prompt),
        "sequence_start": starts_sequence(turn, before),
        "finish_reason": resp.finish_reason,
        "model": resp.model or (prompt.model if prompt is not None else None),
        "reward": turn.reward,
        "episode_reward": episode_reward(episode),
        "last_turn": turn.last,
        "episode_status": episode.status,
        "exit_reason": _str_or_none(episode_fact(episode, "exit_reason")),
        "truncation": episode.truncation,
        "episode_error": episode_error(episode),
        **accounting(turn),
        **episode_verdict(episode),
        "policy_version": resp.policy_version,
        **call_times(turn),
    }
    return row


def call_times(turn: Turn) -> Json:
    """When the observation was handed to the policy and when its answer came back (wall time), the
    version serving when it was asked and the time it queued: the runner's record of the call where
    there is one, else the step times (no version, no queue time)."""
    call = turn.step.call
    if call is None:
        return {
            "requested_at": None if turn.prompt_step is None else turn.prompt_step.ended_at,
            "answered_at": turn.step.started_at,
            "requested_version": None,
            "queue_s": None,
        }
    return {
        "requested_at": call.requested_at,
        "answered_at": call.answered_at,
        "requested_version": call.requested_version,
        "queue_s": call.queue_s,
    }


def episode_verdict(episode: EpisodeRecord) -> Json:
    """The episode's outcome (the verifier's pass/fail), blame and whether a trainer masks it
    (``ares.envs.blame``); a record without them is masked when it has no score."""
    outcome, blame, masked = (episode_fact(episode, name) for name in ("outcome", "blame", "masked"))
    if masked is None:
        masked = episode.status not in ("finished", "truncated")
    return {
        "episode_outcome": outcome if isinstance(outcome, bool) else None,
        "episode_blame": _str_or_none(blame),
        "episode_masked": bool(masked),
    }


def turn_rows(episodes: Iterable[EpisodeRecord]) -> list[Json]:
    """The turn view of every episode, in episode order then turn order."""
    rows = []
    for episode in episodes:
        before = None
        for turn in turns(episode):
            rows.append(turn_row(episode, turn, before))
            before = turn
    return rows


def _listed(values: Sequence[Any] | None) -> list[Any] | None:
    return None if values is None else list(values)


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def write_turns_jsonl(episodes: Iterable[EpisodeRecord], path: Path) -> int:
    """The turn view as JSONL, one row per line (atomically); returns the number of rows."""
    rows = turn_rows(episodes)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    os.replace(tmp, path)
    return len(rows)


def load_turns_jsonl(path: Path) -> list[Json]:
    """The rows of a turn-view JSONL file; a malformed line is an error naming its line number."""
    rows = []
    for number, line in enumerate(Path(path).read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{number}: not a turn row ({exc})") from None
        if not isinstance(row, dict) or "completion" not in row:
            raise ValueError(f"{path}:{number}: not a turn row (no completion)")
        rows.append(row)
    return rows
