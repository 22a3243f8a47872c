"""``restore(snapshot)``: a new environment positioned at a snapshot's step."""

from __future__ import annotations

from ares.agents.base import AgentFactory
from ares.agents.bash import BashAgentFactory
from ares.envs.code_env import CodeEnvironment
from ares.envs.snapshots.model import EnvironmentSnapshot
from ares.sandbox.base import SandboxFactory


async def restore(
    snapshot: EnvironmentSnapshot,
    *,
    env: CodeEnvironment | None = None,
    agent_factory: AgentFactory | None = None,
    sandbox_factory: SandboxFactory | None = None,
    step_limit: int | None = 100,
) -> CodeEnvironment:
    """An environment at ``snapshot``'s step; ``env.observation`` is what the policy answers next.

    ``env``: restore into this environment (same preset, so the same agent and limits); otherwise a
    new one on the snapshot's task with the bash agent and the sandbox backend the snapshot was
    taken on (``agent_factory``/``sandbox_factory`` override them).
    """
    if env is None:
        env = CodeEnvironment(
            [snapshot.task],
            agent_factory=agent_factory or BashAgentFactory(),
            sandbox_factory=sandbox_factory or _backend_factory(snapshot),
            step_limit=step_limit,
        )
    await env.restore(snapshot)
    return env


def _backend_factory(snapshot: EnvironmentSnapshot) -> SandboxFactory:
    if snapshot.factory is not None:
        return snapshot.factory  # type: ignore[return-value]
    if snapshot.filesystem.backend == "docker":
        from ares.sandbox.docker import DockerSandboxFactory

        return DockerSandboxFactory()
    from ares.sandbox.local import LocalSandbox

    return LocalSandbox
