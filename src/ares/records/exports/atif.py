"""Harbor's Agent Trajectory Interchange Format (ATIF v1.4): one JSON document per episode.

ATIF describes a session as numbered steps from ``system``, ``user`` or ``agent``. We fill:

- root: ``schema_version``, ``session_id`` (episode id), ``agent`` {name "ares", version, model_name},
  ``steps``, ``final_metrics`` {total_prompt_tokens, total_completion_tokens, total_cost_usd,
  total_steps} (the episode's recorded totals, else the sums over its turns), ``extra`` {task_id,
  status, total_reward, truncation, env, group_id, exit_reason, policy_latency_s, error}.
- system/user steps: the first prompt's messages (system prompt, task instruction), each with
  ``timestamp`` and ``message``.
- agent steps, one per turn of the turn view (``turns.py``): ``message`` (the completion's text),
  ``model_name``, ``tool_calls`` (the reply's native tool calls, else one ``bash`` call per command
  the environment ran, from the rollout trace), ``observation.results`` (command output when traced
  at level "full", each linked by ``source_call_id``, then the environment's feedback messages:
  what the next turn's prompt adds), ``metrics`` (tokens, cost, prompt/completion token ids,
  logprobs) and ``extra.ares`` (turn, step index and type, prompt step, reward, discount, policy
  latency, command exit codes/limits/durations, and where feedback starts in the results).

So the text before agent step t (the first prompt, then each earlier agent message and its
feedback) is turn t's prompt, and agent step t's message is the completion that answered it.

An episode with nothing to show (its reset failed before any prompt) has no ATIF document: ATIF
requires at least one step, so ``to_atif`` raises ``EmptyTrajectoryError`` and ``write_atif`` skips
it (counted in ``WrittenFiles.skipped``).

The loader reads any ATIF document into ``AtifTrajectory`` and, for ours, recovers the messages,
commands and rewards. ``validate_atif`` checks the structural rules of the spec.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from ares.errors import AresError
from ares.llm.types import LLMRequest
from ares.records.exports.turns import Turn, accounting, episode_fact, feedback, first_prompt, turns
from ares.records.model import EpisodeRecord, StepRecord

Json = dict[str, Any]
SCHEMA_VERSION = "ATIF-v1.4"
SOURCES = frozenset({"system", "user", "agent"})
AGENT_ONLY = ("model_name", "reasoning_effort", "reasoning_content", "tool_calls", "metrics")
_ROLE_SOURCE = {"system": "system", "assistant": "agent"}
_COMMAND_FACTS = ("cwd", "exit_code", "timed_out", "limit_hit", "duration_s")


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


def _ares_version() -> str:
    try:
        return version("ares")
    except PackageNotFoundError:
        return "unknown"


def _arguments(raw: str) -> Json:
    """ATIF wants an object; a tool call whose arguments are not a JSON object is kept under "raw"."""
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return {"raw": raw}
    return value if isinstance(value, dict) else {"raw": raw}


def _commands(trace: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    state = (trace or {}).get("env_state") or {}
    return list(state.get("commands") or [])


class EmptyTrajectoryError(AresError, ValueError):
    """The episode has nothing an ATIF step could hold (ATIF requires at least one step)."""


class WrittenFiles(list[Path]):
    """The files ``write_atif`` wrote; ``skipped`` lists the ids of episodes it could not write."""

    def __init__(self) -> None:
        super().__init__()
        self.skipped: list[str] = []


def to_atif(episode: EpisodeRecord) -> Json:
    """The episode as an ATIF trajectory document.

    Raises ``EmptyTrajectoryError`` for an episode with no step to show (e.g. one whose reset
    failed): Harbor's model rejects ``steps: []`` and inventing a step would put text in the record
    that no one said.
    """
    steps = _prompt_steps(episode)
    totals = {"prompt": 0, "completion": 0, "cost": 0.0}
    model_name = None
    for turn in turns(episode):
        model_name = model_name or turn.response.model or (turn.prompt.model if turn.prompt else None)
        steps.append(_agent_step(episode.episode_id, turn, totals))
    if not steps:
        raise EmptyTrajectoryError(
            f"episode {episode.episode_id} ({episode.status}) has no prompt or reply to write as ATIF steps"
        )
    agent_info: Json = {"name": "ares", "version": _ares_version()}
    if model_name:
        agent_info["model_name"] = model_name
    return {
        "schema_version": SCHEMA_VERSION,
        "session_id": episode.episode_id,
        "agent": agent_info,
        "steps": [{"step_id": i, **s} for i, s in enumerate(steps, start=1)],
        "final_metrics": {
            "total_prompt_tokens": _total(episode, "prompt_tokens", totals["prompt"]),
            "total_completion_tokens": _total(episode, "completion_tokens", totals["completion"]),
            "total_cost_usd": _total(episode, "cost_usd", totals["cost"]),
            "total_steps": len(steps),
        },
        "extra": _episode_extra(episode),
    }


def _prompt_steps(episode: EpisodeRecord) -> list[Json]:
    """The first prompt's messages (system prompt, task instruction) as the leading system/user steps."""
    start = first_prompt(episode)
    return [
        {"source": _ROLE_SOURCE.get(m.role, "user"), "timestamp": _iso(episode.started_at), "message": m.text}
        for m in (start.chat() if start is not None else [])
    ]


def _agent_step(episode_id: str, turn: Turn, totals: dict[str, Any]) -> Json:
    """One turn as an agent step (without ``step_id``); adds the turn's tokens and cost to ``totals``."""
    resp, step = turn.response, turn.step
    agent: Json = {"source": "agent", "timestamp": _iso(step.started_at), "message": resp.content or ""}
    if resp.model:
        agent["model_name"] = resp.model
    commands = _commands(step.trace)
    calls, results = _calls_and_outputs(episode_id, turn, commands)
    feedback_from = len(results)
    results += _feedback_results(step, {c["tool_call_id"] for c in calls})
    if calls:
        agent["tool_calls"] = calls
    if results:
        agent["observation"] = {"results": results}
    cost = accounting(turn)
    if metrics := _metrics(turn.prompt, resp, cost, totals):
        agent["metrics"] = metrics
    agent["extra"] = {
        "ares": {
            "turn": turn.index, "step_index": step.index, "step_type": step.step_type,
            "prompt_step": None if turn.prompt_step is None else turn.prompt_step.index,
            "reward": step.reward, "turn_reward": turn.reward, "discount": step.discount,
            "policy_latency_s": cost["policy_latency_s"], "feedback_from": feedback_from,
            "commands": [{k: c.get(k) for k in ("cmd", *_COMMAND_FACTS)} for c in commands],
        }
    }  # fmt: skip
    return agent


def _calls_and_outputs(
    episode_id: str, turn: Turn, commands: Sequence[Mapping[str, Any]]
) -> tuple[list[Json], list[Json]]:
    """The turn's tool calls and their outputs: the reply's native calls (outputs unknown), else one
    ``bash`` call per traced command, with its output."""
    resp, step = turn.response, turn.step
    if resp.tool_calls:
        calls = [{"tool_call_id": c.id, "function_name": c.name, "arguments": _arguments(c.arguments)}
                 for c in resp.tool_calls]  # fmt: skip
        return calls, []
    ids = [f"{episode_id}-{step.index}-{j}" for j in range(len(commands))]
    calls = [{"tool_call_id": i, "function_name": "bash", "arguments": {"command": c.get("cmd", "")}}
             for i, c in zip(ids, commands, strict=True)]  # fmt: skip
    return calls, [_command_result(i, c) for i, c in zip(ids, commands, strict=True)]


def _feedback_results(step: StepRecord, call_ids: set[str]) -> list[Json]:
    """The environment's feedback messages as observation results, linked to a call where they answer one."""
    return [{"source_call_id": m.tool_call_id, "content": m.text} if m.tool_call_id in call_ids
            else {"content": m.text} for m in feedback(step)]  # fmt: skip


def _episode_extra(episode: EpisodeRecord) -> Json:
    """The root ``extra``: what ATIF has no field for (task, status, reward, how the episode ended)."""
    error = episode.error
    return {
        "task_id": episode.task_id, "status": episode.status, "total_reward": episode.total_reward,
        "truncation": episode.truncation, "env": dict(episode.env),
        "group_id": episode_fact(episode, "group_id"),
        "exit_reason": episode_fact(episode, "exit_reason"),
        "policy_latency_s": episode_fact(episode, "policy_latency_s"),
        "error": None if error is None else {"type": error.type, "message": error.message},
    }  # fmt: skip


def _total(episode: EpisodeRecord, name: str, summed: Any) -> Any:
    """The episode's own total where it recorded one, else the sum over its turns."""
    recorded = episode_fact(episode, name)
    return recorded if isinstance(recorded, int | float) and not isinstance(recorded, bool) else summed


def _command_result(call_id: str, command: Mapping[str, Any]) -> Json:
    result: Json = {"source_call_id": call_id}
    output = "".join(command.get(k) or "" for k in ("stdout", "stderr"))
    if "stdout" in command or "stderr" in command:
        result["content"] = output
    return result


def _metrics(prompt: LLMRequest | None, resp: Any, cost: Mapping[str, Any], totals: dict[str, Any]) -> Json:
    metrics: Json = {}
    if cost["prompt_tokens"] is not None:
        metrics["prompt_tokens"] = int(cost["prompt_tokens"])
        totals["prompt"] += int(cost["prompt_tokens"])
    if cost["completion_tokens"] is not None:
        metrics["completion_tokens"] = int(cost["completion_tokens"])
        totals["completion"] += int(cost["completion_tokens"])
    if cost["cost_usd"] is not None:
        metrics["cost_usd"] = float(cost["cost_usd"])
        totals["cost"] += float(cost["cost_usd"])
    if prompt is not None and prompt.prompt_token_ids is not None:
        metrics["prompt_token_ids"] = list(prompt.prompt_token_ids)
    if resp.token_ids is not None:
        metrics["completion_token_ids"] = list(resp.token_ids)
    if resp.logprobs is not None:
        metrics["logprobs"] = list(resp.logprobs)
    return metrics


def write_atif(episodes: Iterable[EpisodeRecord], directory: Path) -> WrittenFiles:
    """Write ``DIR/<episode_id>.atif.json`` per episode (atomically); returns the paths written.

    Episodes with no step to show are skipped; their ids are in the result's ``skipped``."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = WrittenFiles()
    for episode in episodes:
        try:
            doc = to_atif(episode)
        except EmptyTrajectoryError:
            paths.skipped.append(episode.episode_id)
            continue
        target = directory / f"{episode.episode_id}.atif.json"
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_text(json.dumps(doc, indent=2, ensure_ascii=False))
        os.replace(tmp, target)
        paths.append(target)
    return paths


# --- reading back -----------------------------------------------------------------------------


def validate_atif(doc: Any) -> list[str]:
    """Every way ``doc`` breaks the ATIF structural rules (empty when it is valid)."""
    if not isinstance(doc, Mapping):
        return ["the document must be a JSON object"]
    problems = [f"missing required field {k!r}" for k in ("schema_version", "session_id", "agent", "steps")
                if k not in doc]  # fmt: skip
    if not str(doc.get("schema_version", "")).startswith("ATIF-v1."):
        problems.append(f"schema_version must be 'ATIF-v1.x', got {doc.get('schema_version')!r}")
    agent = doc.get("agent")
    if not isinstance(agent, Mapping) or not all(isinstance(agent.get(k), str) for k in ("name", "version")):
        problems.append("agent must be an object with string name and version")
    steps = doc.get("steps")
    if not isinstance(steps, list) or not steps:
        return [*problems, "steps must be a non-empty array"]
    for n, step in enumerate(steps, start=1):
        problems += [f"steps[{n - 1}]: {p}" for p in _step_problems(step, n)]
    return problems


def _step_problems(step: Any, n: int) -> list[str]:
    if not isinstance(step, Mapping):
        return ["must be an object"]
    problems = []
    if step.get("step_id") != n:
        problems.append(f"step_id must be {n} (sequential from 1), got {step.get('step_id')!r}")
    if step.get("source") not in SOURCES:
        problems.append(f"source must be one of {sorted(SOURCES)}, got {step.get('source')!r}")
    if not isinstance(step.get("message"), str):
        problems.append("message must be a string")
    if "timestamp" in step:
        try:
            datetime.fromisoformat(str(step["timestamp"]))
        except ValueError:
            problems.append(f"timestamp is not ISO 8601: {step['timestamp']!r}")
    if step.get("source") != "agent":
        problems += [f"{k} is only allowed on agent steps" for k in AGENT_ONLY if k in step]
    call_ids = {c.get("tool_call_id") for c in step.get("tool_calls") or ()}
    for c in step.get("tool_calls") or ():
        if not (isinstance(c.get("function_name"), str) and isinstance(c.get("arguments"), Mapping)):
            problems.append(f"tool call {c.get('tool_call_id')!r} needs function_name and object arguments")
    for r in (step.get("observation") or {}).get("results", ()):
        if r.get("source_call_id") is not None and r["source_call_id"] not in call_ids:
            problems.append(f"observation result refers to unknown tool call {r['source_call_id']!r}")
    return problems


@dataclass(frozen=True, slots=True)
class AtifStep:
    step_id: int
    source: str
    message: str
    timestamp: str | None = None
    model_name: str | None = None
    tool_calls: tuple[Mapping[str, Any], ...] = ()
    results: tuple[Mapping[str, Any], ...] = ()
    metrics: Mapping[str, Any] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ares(self) -> Mapping[str, Any]:
        return self.extra.get("ares") or {}

    def feedback(self) -> tuple[Mapping[str, Any], ...]:
        """Observation results that are the environment's messages rather than command outputs."""
        start = self.ares.get("feedback_from")
        if start is not None:
            return self.results[start:]
        return tuple(r for r in self.results if r.get("source_call_id") is None)


@dataclass(frozen=True, slots=True)
class AtifTrajectory:
    """An ATIF document, lightly typed; ``messages``/``commands``/``rewards`` read ours back."""

    schema_version: str
    session_id: str
    agent: Mapping[str, Any]
    steps: tuple[AtifStep, ...]
    final_metrics: Mapping[str, Any] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)

    def messages(self) -> list[Json]:
        """The conversation as role/content messages (feedback results become user/tool messages)."""
        out: list[Json] = []
        for step in self.steps:
            role = {"agent": "assistant"}.get(step.source, step.source)
            out.append({"role": role, "content": step.message})
            for r in step.feedback():
                if r.get("source_call_id"):
                    out.append(
                        {"role": "tool", "content": r.get("content"), "tool_call_id": r["source_call_id"]}
                    )
                else:
                    out.append({"role": "user", "content": r.get("content")})
        return out

    def commands(self) -> list[str]:
        return [c["arguments"].get("command", "") for s in self.steps for c in s.tool_calls
                if c.get("function_name") == "bash"]  # fmt: skip

    def rewards(self) -> list[float | None]:
        return [s.ares.get("reward") for s in self.steps if s.source == "agent"]


def atif_from_json(doc: Mapping[str, Any]) -> AtifTrajectory:
    """Parse an ATIF document; raises ValueError listing what makes it invalid."""
    if problems := validate_atif(doc):
        raise ValueError("invalid ATIF trajectory: " + "; ".join(problems))
    return AtifTrajectory(
        schema_version=doc["schema_version"],
        session_id=doc["session_id"],
        agent=doc["agent"],
        steps=tuple(_step(s) for s in doc["steps"]),
        final_metrics=doc.get("final_metrics") or {},
        extra=doc.get("extra") or {},
    )


def _step(s: Mapping[str, Any]) -> AtifStep:
    return AtifStep(
        step_id=s["step_id"],
        source=s["source"],
        message=s["message"],
        timestamp=s.get("timestamp"),
        model_name=s.get("model_name"),
        tool_calls=tuple(s.get("tool_calls") or ()),
        results=tuple((s.get("observation") or {}).get("results") or ()),
        metrics=s.get("metrics") or {},
        extra=s.get("extra") or {},
    )


def load_atif(path: Path) -> list[AtifTrajectory]:
    """One ``.atif.json``/``.json`` file, or every ``*.atif.json`` in a directory (sorted by name)."""
    path = Path(path)
    files: Sequence[Path] = [path] if path.is_file() else sorted(path.glob("*.atif.json"))
    return [atif_from_json(json.loads(f.read_text())) for f in files]
