"""The SWE verifier with the integrity plugin armed, on the toolz fixture, as root and as uid 65534.

The audit's in-process exploits (library code that rewrites pytest's reports, or registers a pass-all
hookwrapper on the running config) earn 1.0 with the plugin disarmed and 0 with the term ``tampered``
armed; the real fix armed earns 1.0 with a clean ``swe/integrity.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ares.audit.payloads import HOOKWRAPPER_TAMPER, REPORT_TAMPER
from ares.policies.scripted import ReplayPolicy, oracle_command
from ares.presets import make
from ares.rollout.runner import run_episode
from ares.tasks.swe.harness import swebench_available
from ares.tasks.swe.verification import SweVerification
from nobody_python import SKIP_REASON, can_drop, run_as_nobody

FIXTURES = Path(__file__).parents[2] / "fixtures" / "swe"
INSTANCES = FIXTURES / "instances.jsonl"
TOOLZ = "pytoolz__toolz-90001"
SRC = Path(__file__).parents[3] / "src"
TAMPERS = {"report_objects": REPORT_TAMPER, "hookwrapper": HOOKWRAPPER_TAMPER}
DRIVER = """
import asyncio, json
from test_swe_integrity import FIXTURES, TAMPERS, play
from ares.sandbox.local.images import local_builder

async def main():
    await local_builder().build(FIXTURES / "images" / "toolz", tags=("ares-swe/toolz:1.2.0",))
    out = {"oracle": await play(None, fix=True)}
    for name, code in TAMPERS.items():
        out[name] = await play(code)
    print(json.dumps(out))

asyncio.run(main())
"""

pytestmark = pytest.mark.skipif(not swebench_available(), reason="needs swebench + unidiff (ares[swe])")


def _policy(plant: str | None, *, fix: bool) -> Any:
    def factory(task: Any, fmt: Any) -> ReplayPolicy:
        steps = []
        if plant is not None:
            heredoc = f"<<'ARES_EOF'\n{plant}\nARES_EOF"
            steps.append(fmt.command(f"cd /testbed && cat >> toolz/__init__.py {heredoc}"))
        if fix:
            steps.append(fmt.command(oracle_command(task)))
        return ReplayPolicy(steps, fmt.submit())

    return factory


async def play(plant: str | None, *, fix: bool = False) -> dict[str, Any]:
    async with make("swebench", path=INSTANCES, tasks=TOOLZ) as env:
        result = await run_episode(env, _policy(plant, fix=fix), index=0, task=0, seed=0)
    episode = result.record.get("episode", result.record)
    files = episode.get("verifier_files") or {}
    return {
        "status": str(result.status),
        "reward": result.reward,
        "terms": episode.get("reward_terms") or {},
        "integrity": json.loads(files.get("swe/integrity.json") or "null"),
        "log": (files.get("swe/eval.log") or "")[-3000:],
    }


async def test_the_fix_armed_scores_one_with_a_clean_account(project_images: None) -> None:
    out = await play(None, fix=True)
    assert (out["status"], out["reward"]) == ("finished", 1.0), out
    assert out["integrity"]["armed"] and out["integrity"]["tampered"] == [], out["integrity"]
    assert out["integrity"]["tests_seen"] > 0


@pytest.mark.parametrize("name", sorted(TAMPERS))
async def test_in_process_tampering_is_caught_armed_and_pays_disarmed(
    project_images: None, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    armed = await play(TAMPERS[name])
    assert (armed["status"], armed["reward"]) == ("finished", 0.0), armed
    assert armed["terms"].get("tampered") == 1.0, armed
    monkeypatch.setattr(SweVerification, "integrity_armable", property(lambda self: False))
    disarmed = await play(TAMPERS[name])
    assert (disarmed["status"], disarmed["reward"]) == ("finished", 1.0), disarmed


@pytest.mark.skipif(not can_drop(), reason=SKIP_REASON)
def test_armed_grading_unprivileged(request: pytest.FixtureRequest) -> None:
    paths = [SRC, Path(__file__).parent, Path(__file__).parents[2]]
    done = run_as_nobody(request, "ares-nobody-integrity-", DRIVER, paths)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert (out["oracle"]["reward"], out["oracle"]["integrity"]["tampered"]) == (1.0, []), out["oracle"]
    for name in TAMPERS:
        assert (out[name]["status"], out[name]["reward"]) == ("finished", 0.0), out[name]
        assert out[name]["terms"].get("tampered") == 1.0, out[name]
