"""A Harbor task with a real Dockerfile (FROM python, RUN pip install, COPY, WORKDIR) end to end on the
local backend: built once, rewarded correctly, and every layer reused on the next build."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ares.policies import make_policy
from ares.presets import make
from ares.rollout.runner import run_episode

TASK = Path(__file__).parents[1] / "fixtures" / "harbor" / "pytest-app"


async def test_oracle_and_null_on_a_built_image() -> None:
    rewards = {}
    for policy in ("oracle", "null"):
        async with make("harbor", path=TASK) as env:
            result = await run_episode(env, make_policy(policy), index=0, task=0, seed=0)
        assert result.status == "finished", result.record
        rewards[policy] = result.reward
    assert rewards == {"oracle": 1.0, "null": 0.0}


async def test_agent_sees_the_image_workdir_and_installed_packages() -> None:
    async with make("harbor", path=TASK) as env:
        await env.reset()
        sandbox = env.sandbox
        assert sandbox is not None
        result = await sandbox.exec("pwd && ls && python -c 'import pytest; print(pytest.__name__)'")
        assert result.ok, result
        assert result.stdout.split() == ["/app", "inventory.py", "test_inventory_smoke.py", "pytest"]


def test_cli_build_log_shows_every_layer_reused_the_second_time() -> None:
    command = [sys.executable, "-m", "ares.cli.main", "images", "build", str(TASK)]
    env = {**os.environ, "COLUMNS": "200"}
    subprocess.run(command, check=True, capture_output=True, text=True, env=env)
    second = subprocess.run(command, check=True, capture_output=True, text=True, env=env).stdout
    steps = [line for line in second.splitlines() if line.startswith("Step ")]
    assert [s.split(" : ", 1)[1] for s in steps] == [
        "FROM python:3.11-slim",
        "RUN pip install --no-cache-dir pytest",
        "COPY src/ /app/",
        "WORKDIR /app",
    ]
    assert second.count("---> Using cache") == 4  # base setup + RUN + COPY + WORKDIR
    assert "0 built" in second
    listing = subprocess.run(
        [sys.executable, "-m", "ares.cli.main", "images", "list"],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout
    assert "python:3.11-slim" in listing
