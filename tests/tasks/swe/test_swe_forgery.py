"""The SWE verifier against forgeries (``swe_forgeries``), as root and as an unprivileged host user.

Every forgery is played on the toolz fixture, alone (reward 0, the episode finished) and, for the ones
that only add files, together with the real fix (reward 1: what the forgery planted changed nothing).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from swe_forgeries import FORGERIES, SweForgery

from ares.policies.scripted import ReplayPolicy, oracle_command
from ares.presets import make
from ares.rollout.runner import run_episode
from ares.tasks.swe.harness import swebench_available
from nobody_python import SKIP_REASON, can_drop, run_as_nobody

FIXTURES = Path(__file__).parents[2] / "fixtures" / "swe"
INSTANCES = FIXTURES / "instances.jsonl"
TOOLZ = "pytoolz__toolz-90001"
SRC = Path(__file__).parents[3] / "src"
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
#: Played as nobody: builds the toolz image in nobody's cache, then every forgery; prints the outcomes.
DRIVER = """
import asyncio, json, sys
from pathlib import Path
from swe_forgeries import FORGERIES
from test_swe_forgery import FIXTURES, _play
from ares.sandbox.local.images import local_builder

async def main():
    await local_builder().build(FIXTURES / "images" / "toolz", tags=("ares-swe/toolz:1.2.0",))
    outcomes = {}
    for forgery in FORGERIES:
        result, episode = await _play(forgery)
        outcomes[forgery.name] = [str(result.status), result.reward, episode.get("error")]
    print(json.dumps(outcomes))

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


async def _play(forgery: SweForgery, *, fix: bool = False) -> tuple[Any, dict[str, Any]]:
    async with make("swebench", path=INSTANCES, tasks=TOOLZ) as env:
        result = await run_episode(env, _policy(forgery.script, fix=fix), index=0, task=0, seed=0)
    return result, result.record.get("episode", result.record)


@pytest.mark.parametrize("forgery", FORGERIES, ids=lambda f: f.name)
async def test_forgery_scores_zero_as_root(project_images: None, forgery: SweForgery) -> None:
    result, episode = await _play(forgery)
    assert result.status == "finished", episode.get("error")
    assert result.reward == 0.0, (
        forgery.name,
        episode["reward_terms"],
        episode["verifier_files"]["swe/eval.log"][-3000:],
    )
    log = episode["verifier_files"]["swe/eval.log"]
    assert "HOOK-RAN" not in log and "FILTER-RAN" not in log


@pytest.mark.skipif(not can_drop(), reason=SKIP_REASON)
def test_every_forgery_scores_zero_unprivileged(request: pytest.FixtureRequest) -> None:
    """The same suite with ARES itself run by uid 65534: user-namespace sandboxes, nobody's own cache."""
    paths = [SRC, Path(__file__).parent, Path(__file__).parents[2]]
    done = run_as_nobody(request, "ares-nobody-swe-", DRIVER, paths)
    assert done.returncode == 0, done.stderr[-3000:]
    outcomes = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(outcomes) == {f.name for f in FORGERIES}
    assert {name: o[:2] for name, o in outcomes.items() if o[:2] != ["finished", 0.0]} == {}, outcomes
