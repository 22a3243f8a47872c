"""Limits from a Harbor task.toml reach the local sandbox, and the bash agent tells the model about hits."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import ares
from ares.agents.bash import BashActionFormat
from ares.llm.types import LLMRequest
from ares.sandbox import SandboxSpec
from ares.sandbox.local import LocalSandbox

FMT = BashActionFormat()
MEMORY_HOG = "python3 -c 'x = []\nwhile True: x.append(bytearray(1 << 20))'"
FORK_BOMB = """python3 -c '
import os
r, w = os.pipe()
for _ in range(1000):
    if os.fork() == 0:
        os.close(w)
        os.read(r, 1)
        os._exit(0)
'"""


def last_message(observation: object) -> str:
    assert isinstance(observation, LLMRequest)
    return observation.messages[-1].text


async def test_task_limits_flow_from_task_toml_to_the_agent(tmp_path: Path) -> None:
    task_dir = tmp_path / "limited"
    (task_dir / "tests").mkdir(parents=True)
    (task_dir / "task.toml").write_text(
        '[environment]\nmemory = "64M"\npids_limit = 16\n[verifier]\ntimeout_sec = 30\n'
    )
    (task_dir / "instruction.md").write_text("Survive the limits.")
    (task_dir / "tests" / "test.sh").write_text("mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt")
    made: list[LocalSandbox] = []

    def factory(spec: SandboxSpec) -> LocalSandbox:
        made.append(LocalSandbox(spec))
        return made[-1]

    async with ares.make("harbor", path=task_dir, sandbox_factory=factory) as env:
        await env.reset()
        (sandbox,) = made
        limits = sandbox.limits
        assert limits.memory is not None and limits.pids is not None
        if {limits.memory.mechanism, limits.pids.mechanism} - {"cgroup-v1", "cgroup-v2"}:
            pytest.skip(f"memory and pids are not both enforced by cgroups here: {limits}")
        ts = await env.step(FMT.command(MEMORY_HOG))
        assert "[the command was stopped: memory limit of 64 MB reached]" in last_message(ts.observation)
        ts = await env.step(FMT.command(FORK_BOMB))
        assert "[a fork failed: process limit of 16 processes reached]" in last_message(ts.observation)
        # The bomb's children exit once its parent has (their pipe closes): until they are reaped the
        # pids cgroup may still be full, so the agent, like this test, tries again.
        for _ in range(20):
            ts = await env.step(FMT.command("echo fine"))
            if "cannot start the command" not in last_message(ts.observation):
                break
            await asyncio.sleep(0.5)
        assert "fine" in last_message(ts.observation) and "limit" not in last_message(ts.observation)
        ts = await env.step(FMT.submit())
        assert ts.last() and ts.reward == 1.0
        assert env.episode is not None
        hits = env.episode.to_dict()["limit_hits"]
        assert hits.get("memory", 0) >= 1 and hits.get("pids", 0) >= 1, hits
