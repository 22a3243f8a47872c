"""The CodeAgent seam: a fixed scaffold that drives a sandbox by asking an LLM what to do."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from ares.llm.interceptor import LLMClient
from ares.llm.types import LLMResponse
from ares.sandbox.base import Sandbox
from ares.tasks.model import Task


class CodeAgent(Protocol):
    """Runs until it decides it is done. It never knows whether its LLM is being trained."""

    async def run(self) -> None: ...


class ActionFormat(Protocol):
    """How a policy that is not an LLM (oracle, null) speaks this agent's language."""

    def command(self, command: str) -> LLMResponse:
        """A response that makes the agent run ``command``."""
        ...

    def submit(self) -> LLMResponse:
        """A response that makes the agent finish."""
        ...


@runtime_checkable
class SolutionFormat(Protocol):
    """An action format whose agent takes a whole solution in one reply instead of commands: the
    oracle answers it with the task's reference solution file rather than by running solve.sh."""

    def solution(self, code: str) -> LLMResponse:
        """A response that makes the agent write ``code`` as the task's solution file."""
        ...


class AgentFactory(Protocol):
    """Builds one agent per episode; exposes the agent's action format for scripted policies."""

    action_format: ActionFormat

    def __call__(self, *, sandbox: Sandbox, llm: LLMClient, task: Task) -> CodeAgent: ...


@runtime_checkable
class StatefulAgent(Protocol):
    """An agent that can be saved between two LLM calls and resumed (snapshots, forks).

    ``state()`` is JSON-serializable; an agent given it through ``load_state()`` before ``run()``
    first re-issues the pending request it was waiting on, then continues as the original would.
    """

    def state(self) -> dict[str, Any]: ...

    def load_state(self, state: Mapping[str, Any]) -> None: ...
