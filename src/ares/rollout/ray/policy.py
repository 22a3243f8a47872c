"""One policy for a whole cluster: a Ray actor that answers every runner actor's observations.

``shared_policy(factory)`` starts a ``PolicyServer`` actor (an inference manager: a model, a batcher,
a client with one rate limit) and returns a picklable ``PolicyFactory`` for ``run_episodes_ray``.
Each episode gets a session on the server holding the policy ``factory`` built for it, so stateful
policies (oracle, scripted) behave as they do locally.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from ares import tracing
from ares.agents.base import ActionFormat
from ares.core.closing import AsyncClosable
from ares.llm.types import LLMRequest, LLMResponse
from ares.policies.base import Policy, PolicyFactory
from ares.rollout.ray.work import tracing_level
from ares.tasks.model import Task

#: Sessions a server keeps at most; the least recently used one goes first (a runner that died
#: never closes its sessions).
DEFAULT_MAX_SESSIONS = 10_000


class PolicyServer:
    """Builds and keeps one policy per session (episode) and answers its observations."""

    def __init__(
        self, factory: PolicyFactory, max_sessions: int = DEFAULT_MAX_SESSIONS, trace_level: str = "off"
    ) -> None:
        self._factory = factory
        self._max_sessions = max_sessions
        self._sessions: OrderedDict[str, Policy] = OrderedDict()
        if trace_level != "off":
            tracing.configure(trace_level, process=f"policy server (pid {os.getpid()})")  # type: ignore[arg-type]

    async def act(
        self,
        session: str,
        observation: LLMRequest,
        opening: tuple[Task, ActionFormat] | None = None,
        call: int = 0,
    ) -> LLMResponse:
        flow = tracing.flow_id("policy", session, call)
        with tracing.span("policy.serve", cat="policy", track="policy server", flows_in=(flow,), call=call):
            return await self._answer(session, observation, opening)

    async def _answer(
        self, session: str, observation: LLMRequest, opening: tuple[Task, ActionFormat] | None
    ) -> LLMResponse:
        policy = self._sessions.get(session)
        if policy is None:
            if opening is None:
                raise LookupError(f"unknown policy session {session!r} (closed or evicted)")
            policy = self._sessions[session] = self._factory(*opening)
            while len(self._sessions) > self._max_sessions:
                self._sessions.popitem(last=False)
        else:
            self._sessions.move_to_end(session)
        return await policy.act(observation)

    async def close_session(self, session: str) -> None:
        self._sessions.pop(session, None)

    async def sessions(self) -> int:
        return len(self._sessions)

    async def trace_events(self) -> list[dict[str, Any]]:
        return tracing.drain()

    async def shutdown(self) -> None:
        self._sessions.clear()
        if isinstance(self._factory, AsyncClosable):
            await self._factory.aclose()


@dataclass(slots=True)
class RemotePolicy:
    """One episode's policy, living on the server: the first call opens the session with the task."""

    server: Any
    task: Task
    action_format: ActionFormat
    session: str = field(default_factory=lambda: secrets.token_hex(8))
    _opened: bool = False
    _calls: int = 0

    async def act(self, observation: LLMRequest) -> LLMResponse:
        opening = None if self._opened else (self.task, self.action_format)
        call, self._calls = self._calls, self._calls + 1
        flow = tracing.flow_id("policy", self.session, call)
        with tracing.span("policy.remote", cat="policy", flows_out=(flow,), call=call):
            response = await self.server.act.remote(self.session, observation, opening, call)
        self._opened = True
        return response

    async def aclose(self) -> None:
        """Free the session on the server (the runner calls this when the episode ends)."""
        if self._opened:
            with contextlib.suppress(Exception):
                await self.server.close_session.remote(self.session)


@dataclass(frozen=True, slots=True)
class SharedPolicyFactory:
    """A picklable PolicyFactory whose policies all run on one ``PolicyServer`` actor."""

    server: Any

    def __call__(self, task: Task, action_format: ActionFormat) -> Policy:
        return RemotePolicy(self.server, task, action_format)

    async def shutdown(self) -> None:
        """Stop the server (and close what its factory holds); the owner calls this once."""
        import ray

        with contextlib.suppress(Exception):
            await self.server.shutdown.remote()
        ray.kill(self.server, no_restart=True)


def shared_policy(
    factory: PolicyFactory, *, max_sessions: int = DEFAULT_MAX_SESSIONS, **actor_options: Any
) -> SharedPolicyFactory:
    """Start a ``PolicyServer`` actor for ``factory`` (``actor_options`` go to ``.options``, e.g.
    ``num_gpus=1`` for a model); pass the result to ``run_episodes_ray`` as its policy factory.
    It traces at this process's tracing level when started (configure tracing first)."""
    import ray

    options = {"max_concurrency": 10_000, "num_cpus": 0, **actor_options}
    server = ray.remote(PolicyServer).options(**options).remote(factory, max_sessions, tracing_level())
    return SharedPolicyFactory(server)
