"""The environment-level snapshot tests on the docker backend (podman here): a Harbor task whose
episode is snapshotted, restored in a new process and forked, on containers."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from ares.envs.code_env import CodeEnvironment
from ares.presets import make
from bash_steps import FMT, play

FIXBUG = Path(__file__).resolve().parents[1] / "fixtures" / "harbor" / "fix-bug"
HASHES = "find /app -type f -print0 | sort -z | xargs -0 sha256sum"
AFTER = ["rm /app/a.txt && echo three >> /app/d/b.txt", HASHES]


def ours(engine_url: str) -> list[str]:
    """Containers this process still has on the engine."""
    import docker

    client = docker.DockerClient(base_url=engine_url)
    try:
        found = client.api.containers(all=True, filters={"label": f"ares.owner.pid={os.getpid()}"})
        return [c["Id"] for c in found]
    finally:
        client.close()


async def test_docker_snapshot_restores_in_a_new_process(
    tmp_path: Path, factory: Any, engine_url: str
) -> None:
    env = make("harbor", path=FIXBUG, sandbox_factory=factory)
    async with env:
        await env.reset(task=0, seed=3)
        await play(env, ["echo one > /app/a.txt && mkdir -p /app/d && echo two > /app/d/b.txt"])
        snapshot = await env.snapshot()
        assert snapshot.filesystem.backend == "docker"
        await snapshot.save(tmp_path / "snap")
        original = await play(env, AFTER)
    script = textwrap.dedent(f"""
        import asyncio, json, sys
        from ares.agents.bash import BashActionFormat
        from ares.sandbox.docker import DockerConfig, DockerSandboxFactory
        from ares.snapshot import EnvironmentSnapshot, restore
        FMT = BashActionFormat()
        async def main():
            factory = DockerSandboxFactory(DockerConfig(base_url={engine_url!r}))
            env = await restore(EnvironmentSnapshot.load(sys.argv[1]), sandbox_factory=factory)
            async with env:
                seen = []
                for command in {AFTER!r}:
                    ts = await env.step(FMT.command(command))
                    seen.append(ts.observation.messages[-1].text)
            factory.close()
            print(json.dumps(seen))
        asyncio.run(main())
    """)
    out = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-c", script, str(tmp_path / "snap")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == original
    assert "/app/d/b.txt" in original[-1] and "a.txt" not in original[-1]


async def test_docker_fork_branches_are_independent(factory: Any, engine_url: str) -> None:
    env = make("harbor", path=FIXBUG, sandbox_factory=factory)
    assert isinstance(env, CodeEnvironment)
    async with env:
        await env.reset(task=0)
        await play(env, ["echo shared > /app/shared.txt"])
        branches = await env.fork(3)
        try:
            for i, branch in enumerate(branches):
                await play(branch, [f"echo {i} > /app/mine-{i}.txt"])
            for i, branch in enumerate(branches):
                (listing,) = await play(branch, ["ls /app | sort | tr '\\n' ' '"])
                assert f"mine-{i}.txt" in listing and "shared.txt" in listing
                assert all(f"mine-{j}.txt" not in listing for j in range(3) if j != i)
            rewards = [(await branch.step(FMT.submit())).reward for branch in branches]
            assert rewards == [0.0, 0.0, 0.0]  # stats.py is still the buggy one in every branch
        finally:
            for branch in branches:
                await branch.close()
        (original,) = await play(env, ["ls /app | tr '\\n' ' '"])
        assert "mine-" not in original
    assert ours(engine_url) == []  # every container of the episode and its branches is gone
