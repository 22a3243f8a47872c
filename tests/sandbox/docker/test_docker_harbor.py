"""End to end: an unmodified Harbor task (``FROM python:3.11-slim``, ``RUN pip install pytest``) built
and run in docker sandboxes, scored by the verifier in a frozen fork of the agent's container."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import docker
import pytest
from docker_engine_kit import Engine

import ares
from ares.core.status import EpisodeStatus
from ares.envs.code_env import CodeEnvironment
from ares.llm.types import LLMRequest
from ares.policies import make_policy
from ares.sandbox.docker import DockerConfig, DockerSandboxFactory, janitor

HARBOR = Path(__file__).resolve().parents[2] / "fixtures" / "harbor"
TASK = HARBOR / "pytest-app"


async def play(env: CodeEnvironment, policy: str) -> ares.TimeStep:
    ts = await env.reset(task=0)
    assert isinstance(ts.observation, LLMRequest) and env.task is not None
    pol = make_policy(policy)(env.task, env.action_format)
    while not ts.last():
        ts = await env.step(await pol.act(ts.observation))
    return ts


def frozen_images(client: docker.DockerClient) -> set[str]:
    """The frozen images this process made (CI runs other docker tests in a second lane at once)."""
    mine = [f"{janitor.FROZEN_LABEL}=1", f"{janitor.OWNER_PID_LABEL}={os.getpid()}"]
    return {i["Id"] for i in client.api.images(filters={"label": mine})}


async def test_harbor_task_oracle_scores_one_and_null_zero(
    docker_engine: Engine, docker_client: docker.DockerClient, python_slim: str
) -> None:
    factory = DockerSandboxFactory(DockerConfig(base_url=docker_engine.base_url))
    frozen_before = frozen_images(docker_client)
    env = ares.make("harbor", path=TASK, sandbox_factory=factory)
    async with env:
        oracle = await play(env, "oracle")
        assert env.episode is not None and env.episode.status is EpisodeStatus.FINISHED, env.episode.error
        assert oracle.reward == pytest.approx(1.0)
        null = await play(env, "null")
        assert env.episode.status is EpisodeStatus.FINISHED and null.reward == 0.0
    assert len(factory.built) <= 1  # built at most once for both episodes (none if cached)
    assert frozen_images(docker_client) <= frozen_before  # the verifier's temporary images are gone
    leftovers = docker_client.api.containers(all=True, filters={"label": [f"ares.owner.pid={os.getpid()}"]})
    assert leftovers == []
    factory.close()


@pytest.mark.parametrize(("policy", "reward"), [("oracle", 1.0), ("null", 0.0)])
def test_cli_runs_the_task_on_the_docker_backend(
    docker_engine: Engine, python_slim: str, tmp_path: Path, policy: str, reward: float
) -> None:
    env = {**os.environ, "DOCKER_HOST": docker_engine.base_url}
    command = [sys.executable, "-m", "ares.cli.main", "run", "harbor", "--path", str(TASK)]
    command += ["--sandbox", "docker", "-p", policy, "--out", str(tmp_path)]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["episodes"] == 1 and summary["mean_reward"] == reward
    assert summary["statuses"] == {"finished": 1}
