"""SWE-bench-format tasks on ``--sandbox docker``: the oracle resolves, the null policy does not, and
forgeries score 0, graded in a fresh container of the pristine image (``DockerSandbox.fork_verifier``).

The project images are built in the engine from the fixtures' Dockerfiles on an ``ares/host-python``
equivalent (``swe_docker_images.py``); the per-instance images are built by the docker backend.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import docker
import pytest
from swe_docker_images import ensure_project_images

from ares.policies.scripted import ReplayPolicy
from ares.presets import make
from ares.rollout.runner import run_episode
from ares.sandbox.docker import DockerConfig, DockerSandboxFactory
from ares.tasks.swe.harness import swebench_available
from engine_kit import docker_kit

FIXTURES = Path(__file__).parents[2] / "fixtures" / "swe"
INSTANCES = FIXTURES / "instances.jsonl"
CHOSEN = ["pytoolz__toolz-90001", "python-poetry__tomlkit-90004", "pallets__click-90005"]
TOOLZ, TOOLZ_TEST = "pytoolz__toolz-90001", "toolz/tests/test_itertoolz.py"
CONFTEST = """import pytest
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
"""

pytestmark = pytest.mark.skipif(not swebench_available(), reason="needs swebench + unidiff (ares[swe])")


@pytest.fixture(scope="module")
def engine() -> str:
    try:
        url = str(docker_kit().ensure_engine().base_url)
    except RuntimeError as exc:
        pytest.skip(f"no Docker API engine for the docker backend tests: {exc}")
    client = docker.DockerClient(base_url=url, timeout=600)
    try:
        ensure_project_images(client)
    finally:
        client.close()
    return url


@pytest.fixture
def chosen(tmp_path: Path) -> Path:
    """An instance file of three projects' instances, next to the fixtures' images and specs."""
    rows = [line for line in INSTANCES.read_text().splitlines() if json.loads(line)["instance_id"] in CHOSEN]
    path = tmp_path / "three.jsonl"
    path.write_text("\n".join(rows) + "\n")
    (tmp_path / "images").symlink_to(FIXTURES / "images")
    shutil.copyfile(FIXTURES / "specs.json", tmp_path / "specs.json")
    return path


@pytest.mark.parametrize(("policy", "reward"), [("oracle", 1.0), ("null", 0.0)])
def test_cli_oracle_resolves_and_null_does_not_on_docker(
    engine: str, chosen: Path, tmp_path: Path, policy: str, reward: float
) -> None:
    out = tmp_path / "out"
    command = [sys.executable, "-m", "ares.cli.main", "run", "swebench", "--path", str(chosen)]
    command += ["--sandbox", "docker", "-p", policy, "-c", "2", "--out", str(out)]
    env = {**os.environ, "DOCKER_HOST": engine}
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1200, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes"] == 3 and summary["statuses"] == {"finished": 3}
    assert summary["mean_reward"] == reward
    for path in (out / "episodes").iterdir():
        episode = json.loads(path.read_text())
        episode = episode.get("episode", episode)
        grade = json.loads(episode["verifier_files"]["swe/grade.json"])
        assert grade["resolved"] is (policy == "oracle") and grade["f2p"]["total"] > 0
        patch = episode["verifier_files"]["swe/model.patch"]
        assert patch.startswith("diff --git a/") if policy == "oracle" else patch == ""


def _commands(*commands: str) -> Any:
    def factory(task: Any, fmt: Any) -> ReplayPolicy:
        return ReplayPolicy([fmt.command(c) for c in commands], fmt.submit())

    return factory


async def _play(engine: str, policy: Any) -> Any:
    factory = DockerSandboxFactory(DockerConfig(base_url=engine))
    try:
        async with make("swebench", path=INSTANCES, tasks=TOOLZ, sandbox_factory=factory) as env:
            result = await run_episode(env, policy, index=0, task=0, seed=0)
    finally:
        factory.close()
    return result, result.record.get("episode", result.record)


async def test_editing_the_test_file_and_a_passing_conftest_score_zero_on_docker(engine: str) -> None:
    rewrite = f"printf 'def test_tail():\\n    pass\\ndef test_last():\\n    pass\\n' > /testbed/{TOOLZ_TEST}"
    conftests = " && ".join(
        f"cat > {where}/conftest.py <<'EOF'\n{CONFTEST}EOF" for where in ("/testbed", "/testbed/toolz/tests")
    )
    result, episode = await _play(engine, _commands(rewrite, conftests))
    assert result.status == "finished" and result.reward == 0.0, episode["verifier_files"]
    patch = episode["verifier_files"]["swe/model.patch"]
    assert TOOLZ_TEST not in patch and "conftest.py" not in patch  # the test tree is the base's
