"""What the CLI-agent tests share: the CLI installed into the session's add-on cache (or a skip that
says why it cannot be), and playing an episode out with a scripted policy."""

from __future__ import annotations

import asyncio
import shutil

import pytest

import ares
from ares.agents.coding_clis import cli_definition
from ares.agents.install.npm import AgentInstallError, npm_addon
from ares.envs.code_env import CodeEnvironment
from ares.policies import make_policy
from ares.sandbox.addon_cache import ensure_addon

#: What npm says when it cannot reach its registry: then the tests skip; any other failure fails.
OFFLINE_MARKERS = ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ETIMEDOUT", "ECONNRESET", "network")


def install_or_skip(cli: str) -> None:
    """``cli`` at its pinned version in the add-on cache (npm runs once per session)."""
    package = cli_definition(cli).package
    if shutil.which("npm") is None:
        pytest.skip(f"npm is not installed (apt install npm): {package.package} comes from the npm registry")
    try:
        asyncio.run(ensure_addon(npm_addon(package)))
    except AgentInstallError as exc:
        if any(marker in str(exc) for marker in OFFLINE_MARKERS):
            pytest.skip(f"the npm registry is unreachable: {str(exc)[:300]}")
        raise


async def play_out(env: CodeEnvironment, ts: ares.TimeStep, policy: str) -> ares.TimeStep:
    """Step ``env`` from ``ts`` to the episode's end with the scripted ``policy`` (oracle, null)."""
    assert env.task is not None
    pol = make_policy(policy)(env.task, env.action_format)
    while not ts.last():
        ts = await env.step(await pol.act(ts.observation))
    return ts


async def play(env: CodeEnvironment, policy: str, task: int = 0) -> ares.TimeStep:
    """A whole episode of ``task`` with ``policy``."""
    return await play_out(env, await env.reset(task=task), policy)
