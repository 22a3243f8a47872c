"""Policies that need no model: oracle (replays the reference solution), null, and scripted."""

from __future__ import annotations

import base64
import json
import posixpath
import shlex
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ares.agents.base import ActionFormat, SolutionFormat
from ares.errors import PolicyError
from ares.llm.types import LLMRequest, LLMResponse, ToolCall, Usage
from ares.policies.base import Policy, PolicyFactory
from ares.tasks.model import FileSource, Task

SOLUTION_DIR = "/solution"


class ReplayPolicy:
    """Answers each request with the next response of a fixed list, then keeps submitting."""

    __slots__ = ("_fallback", "_index", "_responses")

    def __init__(self, responses: Sequence[LLMResponse], fallback: LLMResponse) -> None:
        self._responses = responses
        self._fallback = fallback
        self._index = 0

    async def act(self, observation: LLMRequest) -> LLMResponse:
        if self._index < len(self._responses):
            self._index += 1
            return self._responses[self._index - 1]
        return self._fallback


def _solution_files(source: FileSource) -> dict[str, bytes]:
    if isinstance(source, Path):
        return {str(p.relative_to(source)): p.read_bytes() for p in sorted(source.rglob("*")) if p.is_file()}
    return {rel: data.encode() if isinstance(data, str) else data for rel, data in source.items()}


def oracle_command(task: Task) -> str:
    """One shell command that materializes the task's solution in /solution and runs solve.sh."""
    if task.solution is None:
        raise PolicyError(
            f"task {task.id} has no reference solution (solution/solve.sh); cannot run the oracle"
        )
    files = _solution_files(task.solution)
    if "solve.sh" not in files:
        raise PolicyError(f"task {task.id}: the solution has no solve.sh")
    lines = [f"rm -rf {SOLUTION_DIR} && mkdir -p {SOLUTION_DIR}"]
    for rel, data in files.items():
        path = posixpath.normpath(f"{SOLUTION_DIR}/{rel}")
        # The parent is known here: no subshell, dirname and mkdir per file (three processes).
        parent = posixpath.dirname(path)
        mkdir = "" if parent == SOLUTION_DIR else f"mkdir -p {shlex.quote(parent)} && "
        encoded = base64.b64encode(data).decode()
        lines.append(f"{mkdir}base64 -d > {shlex.quote(path)} <<'ARES_B64'\n{encoded}\nARES_B64")
    lines.append(f"cd {shlex.quote(task.workdir)} && bash {SOLUTION_DIR}/solve.sh")
    return "\n".join(lines)


def reference_solution(task: Task) -> str:
    """The reference content of the task's solution file: ``solution/<solution_file>``."""
    if task.solution_file is None:
        raise PolicyError(f"task {task.id} declares no solution file; its oracle can only run solve.sh")
    files = _solution_files(task.solution) if task.solution is not None else {}
    if task.solution_file not in files:
        raise PolicyError(
            f"task {task.id}: the reference solution has no {task.solution_file} (add "
            f"solution/{task.solution_file}), so an oracle cannot answer a single-reply agent"
        )
    return files[task.solution_file].decode("utf-8")


class CheckedPolicy:
    """A scripted policy whose format first checks each request (a CLI's tools against the names
    the format speaks), so a mismatch ends the episode with the format's message."""

    __slots__ = ("_check", "_policy")

    def __init__(self, policy: Policy, check: Callable[[LLMRequest], None]) -> None:
        self._policy = policy
        self._check = check

    async def act(self, observation: LLMRequest) -> LLMResponse:
        self._check(observation)
        return await self._policy.act(observation)


def _checked(policy: Policy, fmt: ActionFormat) -> Policy:
    check = getattr(fmt, "check", None)
    return CheckedPolicy(policy, check) if callable(check) else policy


def oracle_policy(task: Task, fmt: ActionFormat) -> Policy:
    """Replays the reference solution through the agent's own action format, then submits: the
    solution file's reference content for agents that take one (``SolutionFormat``), else solve.sh."""
    if isinstance(fmt, SolutionFormat):
        return _checked(ReplayPolicy([fmt.solution(reference_solution(task))], fmt.submit()), fmt)
    return _checked(ReplayPolicy([fmt.command(oracle_command(task))], fmt.submit()), fmt)


def null_policy(task: Task, fmt: ActionFormat) -> Policy:
    """Submits at once without doing anything: the zero-effort baseline."""
    return _checked(ReplayPolicy([], fmt.submit()), fmt)


def response_from_json(data: dict[str, Any]) -> LLMResponse:
    """A scripted response line: {"content": ..., "tool_calls": [...], "finish_reason": ..., ...}."""
    if not isinstance(data, dict):
        raise PolicyError(f"a scripted response must be a JSON object, got {type(data).__name__}")
    calls = tuple(
        ToolCall(id=c.get("id", f"call_{i}"), name=c["name"], arguments=c.get("arguments", "{}"))
        for i, c in enumerate(data.get("tool_calls") or [])
    )
    usage = data.get("usage")
    return LLMResponse(
        content=data.get("content"),
        tool_calls=calls,
        finish_reason=data.get("finish_reason", "stop"),
        usage=Usage(usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)) if usage else None,
        token_ids=tuple(data["token_ids"]) if data.get("token_ids") is not None else None,
        logprobs=tuple(data["logprobs"]) if data.get("logprobs") is not None else None,
    )


def load_script(path: Path) -> list[LLMResponse]:
    """Read a JSONL file of responses (one JSON object per line; blank lines ignored)."""
    if not path.is_file():
        raise PolicyError(
            f"scripted policy: {path} does not exist (pass --script FILE.jsonl; script= in Python)"
        )
    responses = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            responses.append(response_from_json(json.loads(line)))
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise PolicyError(f"{path}:{number}: not a valid scripted response: {exc}") from exc
    if not responses:
        raise PolicyError(f"scripted policy: {path} holds no responses")
    return responses


def scripted_policy_factory(script: str | Path) -> PolicyFactory:
    """Each episode replays the same responses from the start; afterwards the agent is told to submit."""
    responses = load_script(Path(script))

    def make(task: Task, fmt: ActionFormat) -> Policy:
        return ReplayPolicy(responses, fmt.submit())

    return make
