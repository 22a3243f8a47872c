"""The SWE verifier against what an agent leaves in /testbed (``swe_carry_attacks``), local and
docker, as root and as an unprivileged host user.

Test-tree attacks: planted code and data in ``toolz/tests`` change nothing (the forgery alone scores
0, the sabotage with the real fix 1). Floods: every episode ends ``finished`` with reward 0 and the
refusal's term and ``refused.json``, never ``errored``. Timing is measured in bench/, not here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

import docker
import pytest
from swe_carry_attacks import FLOODS, TEST_TREE_FORGE, TEST_TREE_SABOTAGE, CarryAttack
from swe_docker_images import ensure_project_images

from ares.policies.scripted import ReplayPolicy, oracle_command
from ares.presets import make
from ares.rollout.runner import run_episode
from ares.sandbox.docker import DockerConfig, DockerSandboxFactory
from ares.tasks.swe.harness import swebench_available
from engine_kit import docker_kit
from nobody_python import DROP, SKIP_REASON, can_drop, nobody_python

FIXTURES = Path(__file__).parents[2] / "fixtures" / "swe"
INSTANCES = FIXTURES / "instances.jsonl"
TOOLZ = "pytoolz__toolz-90001"
SRC = Path(__file__).parents[3] / "src"
#: The floods CI plays (the bench plays them all): one per kind of bound.
CI_FLOODS = ("flood_entries", "huge_sparse_file", "fifo", "unreadable_dir")
DRIVER = """
import asyncio, json
from swe_carry_attacks import FLOODS, TEST_TREE_FORGE, TEST_TREE_SABOTAGE
from test_swe_carry_attacks import FIXTURES, CI_FLOODS, play, outcome
from ares.sandbox.local.images import local_builder

async def main():
    await local_builder().build(FIXTURES / "images" / "toolz", tags=("ares-swe/toolz:1.2.0",))
    seen = {}
    for attack, fix in [(TEST_TREE_FORGE, False), (TEST_TREE_SABOTAGE, True)]:
        seen[attack.name] = outcome(*await play(attack, fix=fix))
    for attack in FLOODS:
        if attack.name in CI_FLOODS:
            seen[attack.name] = outcome(*await play(attack))
    print(json.dumps(seen))

asyncio.run(main())
"""

pytestmark = pytest.mark.skipif(not swebench_available(), reason="needs swebench + unidiff (ares[swe])")


def _policy(script: str, *, fix: bool) -> Any:
    def factory(task: Any, fmt: Any) -> ReplayPolicy:
        steps = [fmt.command(f"cd /testbed\n{script}")]
        if fix:
            steps.append(fmt.command(oracle_command(task)))
        return ReplayPolicy(steps, fmt.submit())

    return factory


async def play(attack: CarryAttack, *, fix: bool = False, **make_args: Any) -> tuple[Any, dict[str, Any]]:
    async with make("swebench", path=INSTANCES, tasks=TOOLZ, **make_args) as env:
        result = await run_episode(env, _policy(attack.script, fix=fix), index=0, task=0, seed=0)
    return result, result.record.get("episode", result.record)


def outcome(result: Any, episode: dict[str, Any]) -> list[Any]:
    """status, reward, the refusal term (if any) and whether refused.json names it."""
    terms = episode.get("reward_terms") or {}
    refused = [t for t in terms if t.startswith("refused_")]
    record = (episode.get("verifier_files") or {}).get("refused.json")
    named = bool(refused) and record is not None and json.loads(record)["reason"] == refused[0][8:]
    return [str(result.status), result.reward, refused[0] if refused else "", named, episode.get("error")]


def _expected(attack: CarryAttack) -> list[Any]:
    return ["finished", 0.0, attack.term, True, None]


async def test_the_test_tree_reaches_grading_from_the_base(project_images: None) -> None:
    forged = outcome(*await play(TEST_TREE_FORGE))
    sabotaged = outcome(*await play(TEST_TREE_SABOTAGE, fix=True))
    assert forged[:3] == ["finished", 0.0, ""], forged
    assert sabotaged[:3] == ["finished", 1.0, ""], sabotaged


@pytest.mark.parametrize("attack", [a for a in FLOODS if a.name in CI_FLOODS], ids=lambda a: a.name)
async def test_a_flood_is_refused_and_scored_zero(project_images: None, attack: CarryAttack) -> None:
    assert outcome(*await play(attack)) == _expected(attack)


@pytest.mark.skipif(not can_drop(), reason=SKIP_REASON)
def test_the_attacks_as_nobody(request: pytest.FixtureRequest) -> None:
    python = nobody_python() or pytest.skip(SKIP_REASON)
    home = Path(tempfile.mkdtemp(prefix="ares-nobody-carry-"))
    request.addfinalizer(lambda: shutil.rmtree(home, ignore_errors=True))
    os.chown(home, 65534, 65534)
    here, tests = Path(__file__).parent, Path(__file__).parents[2]
    env = {
        "PATH": "/usr/bin:/bin", "HOME": str(home), "TMPDIR": str(home), "ARES_IMAGE_FALLBACK": "offline",
        "PYTHONPATH": os.pathsep.join([str(SRC), str(here), str(tests), sysconfig.get_paths()["purelib"]]),
    }  # fmt: skip
    done = subprocess.run(
        [*DROP, python, "-c", DRIVER], env=env, cwd=home, capture_output=True, text=True, timeout=1200
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen.pop(TEST_TREE_FORGE.name)[:3] == ["finished", 0.0, ""], seen
    assert seen.pop(TEST_TREE_SABOTAGE.name)[:3] == ["finished", 1.0, ""], seen
    assert seen == {a.name: _expected(a) for a in FLOODS if a.name in CI_FLOODS}


#: What the docker backend plays (the engine makes each episode slower): the test tree, the sparse
#: file the archive API would stream byte by byte, and a FIFO.
DOCKER_FLOODS = ("huge_sparse_file", "fifo")


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


async def _play_docker(engine: str, attack: CarryAttack, *, fix: bool = False) -> list[Any]:
    factory = DockerSandboxFactory(DockerConfig(base_url=engine))
    try:
        return outcome(*await play(attack, fix=fix, sandbox_factory=factory))
    finally:
        factory.close()


async def test_the_attacks_on_docker(engine: str) -> None:
    assert (await _play_docker(engine, TEST_TREE_FORGE))[:3] == ["finished", 0.0, ""]
    assert (await _play_docker(engine, TEST_TREE_SABOTAGE, fix=True))[:3] == ["finished", 1.0, ""]
    for attack in (a for a in FLOODS if a.name in DOCKER_FLOODS):
        assert await _play_docker(engine, attack) == _expected(attack), attack.name
