"""Episode records as the plain JSON the viewer page renders.

The page is dumb on purpose: everything that needs knowledge of ARES types (LLM requests and
responses, step traces, the environment's episode summary) is flattened here, in Python, where it is
tested, so the JavaScript only lays out strings and numbers.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ares.llm.context_marks import CONTEXT_KEY
from ares.llm.types import LLMRequest, LLMResponse, Message
from ares.records.model import EpisodeRecord, StepRecord, jsonable

Json = dict[str, Any]


def viewer_data(episodes: Sequence[EpisodeRecord], *, title: str) -> Json:
    """The page's whole input: a title and one summary + conversation per episode."""
    return {"title": title, "episodes": [episode_view(e) for e in episodes]}


def episode_view(episode: EpisodeRecord) -> Json:
    summary = episode.metadata.get("episode")
    summary = summary if isinstance(summary, Mapping) else {}
    reward = episode.total_reward if episode.total_reward is not None else summary.get("reward")
    return {
        "id": episode.episode_id,
        "task": episode.task_id or "",
        "env": jsonable(episode.env),
        "status": episode.status,
        "reward": reward,
        "steps": len(episode.steps),
        "duration_s": episode.duration_s,
        "started_at": episode.started_at,
        "truncation": episode.truncation,
        "exit_reason": summary.get("exit_reason"),
        "group": episode.metadata.get("group_id"),
        "parent": episode.metadata.get("parent_episode_id"),
        "branch_step": episode.metadata.get("branch_step"),
        "policy": _policy_totals(summary),
        "error": None if episode.error is None else dataclasses.asdict(episode.error),
        "verifier": {
            "status": summary.get("status"),
            "stdout": summary.get("verifier_stdout"),
            "stderr": summary.get("verifier_stderr"),
            "limit_hits": jsonable(summary.get("limit_hits")),
            "sandbox_crash": summary.get("sandbox_crash"),
            "mode": summary.get("verifier_mode"),
            "files": _verifier_files(summary.get("verifier_files")),
            "changed_outside": _changed_outside(summary.get("changed_outside")),
        },
        "turns": _turns(episode.steps),
    }


def _policy_totals(summary: Mapping[str, Any]) -> Json:
    """What the policy cost over the episode: its answer time, tokens and money (None: unknown)."""
    return {
        key: summary.get(key)
        for key in ("policy_latency_s", "prompt_tokens", "completion_tokens", "cost_usd")
    }


def _verifier_files(files: Any) -> list[Json]:
    """The files the tests wrote to /logs/verifier, as (name, text) pairs in name order."""
    if not isinstance(files, Mapping):
        return []
    return [{"name": str(name), "text": _text(text)} for name, text in sorted(files.items())]


def _changed_outside(summary: Any) -> Json | None:
    """What the agent changed outside the task's outputs: a count and the first paths."""
    if not isinstance(summary, Mapping) or not summary.get("count"):
        return None
    paths = summary.get("paths")
    return {
        "count": summary.get("count"),
        "truncated": bool(summary.get("truncated")),
        "paths": [str(p) for p in paths] if isinstance(paths, list) else [],
    }


def _turns(steps: Sequence[StepRecord]) -> list[Json]:
    """One entry per step: the agent's reply, what it ran, and the messages that came back.

    Each observation repeats the whole conversation so far; only its new tail is shown, and the
    assistant message echoing the step's own action is dropped (the action is shown once, richer).
    ``context`` marks a compaction: "summary" when the observation asks the policy to summarize,
    "compacted" when it is the fresh context after the summary (a new training sequence starts).
    """
    shown = 0
    turns = []
    for step in steps:
        messages: list[Json] = []
        obs = step.observation
        if isinstance(obs, LLMRequest):
            history = list(obs.messages)
            if obs.system_prompt is not None and not (history and history[0].role == "system"):
                history.insert(0, Message(role="system", content=obs.system_prompt))
            fresh = history[shown:] if len(history) >= shown else history
            if isinstance(step.action, LLMResponse) and fresh and fresh[0].role == "assistant":
                fresh = fresh[1:]
            messages = [_message(m) for m in fresh]
            shown = len(history)
        elif obs is not None:
            messages = [{"role": "observation", "content": _text(jsonable(obs))}]
        trace = step.trace if isinstance(step.trace, Mapping) else {}
        turns.append(
            {
                "index": step.index,
                "step_type": step.step_type,
                "reward": step.reward,
                "discount": step.discount,
                "latency_s": step.latency_s,
                "action": _action(step.action),
                "commands": _commands(trace),
                "reward_terms": _reward_terms(trace),
                "messages": messages,
                "context": _context(obs),
            }
        )
    return turns


def _context(observation: Any) -> str | None:
    mark = observation.metadata.get(CONTEXT_KEY) if isinstance(observation, LLMRequest) else None
    return mark if isinstance(mark, str) else None


def _action(action: Any) -> Json | None:
    if action is None:
        return None
    if isinstance(action, LLMResponse):
        return {
            "content": action.content or "",
            "tool_calls": [{"name": c.name, "arguments": c.arguments} for c in action.tool_calls],
            "finish_reason": action.finish_reason,
            "usage": None
            if action.usage is None
            else {"prompt": action.usage.prompt_tokens, "completion": action.usage.completion_tokens},
        }
    return {"content": _text(jsonable(action)), "tool_calls": [], "finish_reason": None, "usage": None}


def _message(m: Message) -> Json:
    content = m.content if isinstance(m.content, str) or m.content is None else _text(jsonable(m.content))
    calls = [{"name": c.name, "arguments": c.arguments} for c in m.tool_calls]
    return {"role": m.role, "content": content or "", "tool_calls": calls, "name": m.name}


def _commands(trace: Mapping[str, Any]) -> list[Json]:
    state = trace.get("env_state")
    commands = state.get("commands") if isinstance(state, Mapping) else None
    if not isinstance(commands, Sequence):
        return []
    keys = ("cmd", "cwd", "exit_code", "timed_out", "limit_hit", "duration_s", "stdout", "stderr")
    return [{k: jsonable(c.get(k)) for k in keys} for c in commands if isinstance(c, Mapping)]


def _reward_terms(trace: Mapping[str, Any]) -> dict[str, Any]:
    reward = trace.get("reward")
    terms = reward.get("terms") if isinstance(reward, Mapping) else None
    return {str(k): jsonable(v) for k, v in terms.items()} if isinstance(terms, Mapping) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, indent=2)
