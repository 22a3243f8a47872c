"""An episode's agent as the environment sees it: an asyncio task that talks to the policy.

The sandbox it needs (its add-ons over the task's image), the policy client it calls (token-exact
when the policy has a chat template), a restored agent's state, one traced turn until its next
request, stopping it, and how its run ended: its own exception (a sandbox crash its own command
caused is kept on record instead), a cancellation from outside, or why it finished before its first
LLM call (an external program's exit and output).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping

from ares import tracing
from ares.agents.base import AgentFactory, StatefulAgent
from ares.envs.episode import Episode
from ares.envs.snapshots.model import EnvironmentSnapshot
from ares.errors import AgentError, SandboxCrashedError, SandboxKilledError, SnapshotError
from ares.llm.interceptor import AgentFinished, InterceptedLLMClient, LLMClient
from ares.llm.tokens import TokenExactClient, TokenRenderer
from ares.llm.types import LLMRequest
from ares.sandbox.addons import AddonLayer
from ares.sandbox.base import SandboxSpec
from ares.tasks.model import Task


def agent_sandbox_spec(task: Task, agent_factory: AgentFactory) -> SandboxSpec:
    """The task's sandbox, with the agent's add-ons (an installed CLI) over its image."""
    spec = task.sandbox_spec()
    addons: tuple[AddonLayer, ...] = tuple(getattr(agent_factory, "addons", ()))
    return dataclasses.replace(spec, addons=spec.addons + addons) if addons else spec


def policy_client(
    client: InterceptedLLMClient, renderer: TokenRenderer | None, resume: EnvironmentSnapshot | None
) -> LLMClient:
    """What the agent calls: ``client``, or with a ``renderer`` a token-exact client over it (one per
    episode: it follows this agent's conversation, from a restored one's pending request)."""
    if renderer is None:
        return client
    return TokenExactClient(client, renderer, resume=resume.observation if resume else None)


def load_agent_state(agent: object, resume: EnvironmentSnapshot) -> None:
    """Give a restored episode's new agent the state its snapshot saved."""
    if not isinstance(agent, StatefulAgent):
        raise SnapshotError(f"the agent {type(agent).__name__} cannot load a state (no load_state)")
    agent.load_state(resume.agent_state)


async def agent_turn(client: InterceptedLLMClient) -> LLMRequest:
    """The agent works on the response until its next request (a span at "full": its commands
    nest in it); the agent finishing ends the turn normally, not as an error."""
    with tracing.span("agent.turn", cat="agent", level="full") as turn:
        try:
            return await client.next_request()
        except AgentFinished as exc:
            turn.set("agent_finished", True)
            finished = exc
    try:
        raise finished
    finally:
        del finished  # this frame holding the exception that holds this frame: a cycle


async def stop_agent(agent: asyncio.Task[None] | None, grace_s: float) -> None:
    """Cancel the agent and give it ``grace_s`` to unwind. Its own outcome is read elsewhere; a
    cancellation of the caller propagates (it is never mistaken for the agent's)."""
    if agent is not None and not agent.done():
        agent.cancel()
        await asyncio.wait([agent], timeout=grace_s)


def agent_error(agent: asyncio.Task[None] | None) -> BaseException | None:
    """The exception the agent's run ended with (None while it runs, if cancelled, or if it returned)."""
    if agent is None or not agent.done() or agent.cancelled():
        return None
    return agent.exception()


def episode_error(
    agent: asyncio.Task[None] | None, episode: Episode, limit: str | None
) -> BaseException | None:
    """What errors the episode once its agent stopped (None: verify it), ``limit`` being the limit
    that cut the agent off, if one did."""
    error = agent_error(agent)
    if isinstance(error, SandboxCrashedError) and not isinstance(error, SandboxKilledError):
        # The agent's command may have taken the sandbox down: its files still count, so verify
        # them (where the backend can) and keep the crash on record instead of erroring.
        episode.sandbox_crash, error = str(error), None
    if error is None and agent is not None and agent.cancelled() and limit is None:
        error = AgentError("the agent task was cancelled from outside the environment")
    return error


def agent_report(episode: Episode | None, agent: object) -> None:
    """Keep the agent's report with the episode, e.g. an external CLI's exit and output."""
    report = getattr(agent, "report", None)
    if episode is not None and isinstance(report, Mapping) and report:
        episode.metadata["agent"] = dict(report)


def no_call_reason(agent: object) -> str:
    """Why an agent ended before its first LLM call: an external program's exit and output, if any."""
    report = getattr(agent, "report", None)
    code = report.get("exit_code") if isinstance(report, Mapping) else None
    if not isinstance(report, Mapping) or code in (None, 0):
        return "the agent finished without a single LLM call; nothing to observe"
    tail = str(report.get("stderr_tail") or report.get("stdout_tail") or "").strip()[-600:]
    return f"the agent exited with code {code} before its first LLM call: {tail or '(no output)'}"
