"""SWE verification time with and without the integrity plugin, on the SWE fixtures (the oracle's fix).

For each instance (one per project by default, ``--all`` for the 25), the oracle episode is played
``--repeats`` times armed and disarmed, interleaved (armed, disarmed, armed, ...) so that load on the
machine falls on both alike; the figure is the wall time of ``verify`` (carry, diff, eval script). The
armed/disarmed ratio of the medians is the plugin's cost; every armed run must also score 1.0 clean.

    PYTHONPATH=src python bench/swe_integrity.py [--repeats 3] [--all]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import Any

import ares.envs.code_env as code_env
from _common import machine_info
from ares.policies.scripted import ReplayPolicy, oracle_command
from ares.presets import make
from ares.rollout.runner import run_episode
from ares.sandbox.local.images import local_builder
from ares.tasks.swe.verification import SweVerification

FIXTURES = Path(__file__).parents[1] / "tests" / "fixtures" / "swe"
INSTANCES = FIXTURES / "instances.jsonl"
#: The fixture images (as tests/swe_images.py builds them).
PROJECTS = {
    "toolz": "1.2.0", "tomlkit": "0.15.2", "marshmallow": "4.4.0", "boltons": "26.2.0", "click": "8.5.1",
}  # fmt: skip
ARMABLE = SweVerification.integrity_armable


def _oracle(task: Any, fmt: Any) -> ReplayPolicy:
    return ReplayPolicy([fmt.command(oracle_command(task))], fmt.submit())


async def _verify_seconds(instance: str, armed: bool) -> tuple[float, float | None, bool]:
    times: list[float] = []
    real = code_env.verify

    async def timed(task: Any, sandbox: Any) -> Any:
        start = time.monotonic()
        try:
            return await real(task, sandbox)
        finally:
            times.append(time.monotonic() - start)

    code_env.verify = timed
    off = property(lambda self: False)
    SweVerification.integrity_armable = ARMABLE if armed else off  # type: ignore[method-assign,assignment]
    try:
        async with make("swebench", path=INSTANCES, tasks=instance) as env:
            result = await run_episode(env, _oracle, index=0, task=0, seed=0)
    finally:
        code_env.verify, SweVerification.integrity_armable = real, ARMABLE  # type: ignore[method-assign]
    files = result.record.get("episode", result.record).get("verifier_files") or {}
    report = json.loads(files.get("swe/integrity.json") or "null")
    clean = report is None or (report["armed"] and not report["tampered"])
    return times[0], result.reward, clean


async def main(repeats: int, every: bool) -> dict[str, Any]:
    ids = [json.loads(line)["instance_id"] for line in INSTANCES.read_text().splitlines() if line.strip()]
    if not every:
        ids = [i for i in ids if i.endswith("-90001")]
    builder = local_builder()
    for name, version in PROJECTS.items():
        await builder.build(FIXTURES / "images" / name, tags=(f"ares-swe/{name}:{version}",))
    rows: dict[str, Any] = {}
    for instance in ids:
        armed: list[float] = []
        plain: list[float] = []
        problems: list[str] = []
        for _ in range(repeats):
            for flag, sink in ((True, armed), (False, plain)):
                seconds, reward, clean = await _verify_seconds(instance, flag)
                sink.append(seconds)
                if reward != 1.0 or not clean:
                    problems.append(f"armed={flag}: reward {reward}, clean {clean}")
        rows[instance] = {
            "armed_s": round(statistics.median(armed), 2),
            "disarmed_s": round(statistics.median(plain), 2),
            "ratio": round(statistics.median(armed) / statistics.median(plain), 3),
            "problems": problems,
        }
    ratios = [r["ratio"] for r in rows.values()]
    return {
        "bench": "swe_integrity",
        "machine": machine_info(),
        "repeats": repeats,
        "median_ratio": round(statistics.median(ratios), 3),
        "worst_ratio": max(ratios),
        "instances": rows,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--all", action="store_true")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.repeats, args.all)), indent=1))
