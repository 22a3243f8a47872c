"""Verifier time on the SWE toolz fixture after each carry attack (tests/tasks/swe/swe_carry_attacks.py).

Every attack is one episode; the figure is the wall time of ``verify`` (the carry, the diff and the
eval script), the outcome its status, reward and refusal term. ``--backend docker`` plays them on the
Docker API engine (``DOCKER_HOST``); ``--only NAME`` plays some.

    PYTHONPATH=src:tests/tasks/swe:tests python bench/verifier_attacks.py [--backend docker]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path[:0] = [
    str(Path(__file__).parents[1] / "tests" / "tasks" / "swe"),
    str(Path(__file__).parents[1] / "tests"),
]

from swe_carry_attacks import FLOODS, TEST_TREE_FORGE, CarryAttack  # noqa: E402
from test_swe_carry_attacks import FIXTURES, outcome, play  # noqa: E402

import ares.envs.code_env as code_env  # noqa: E402
from _common import machine_info  # noqa: E402

NULL = CarryAttack("null", "true\n")


def _timed_verify(times: list[float]) -> Any:
    real = code_env.verify

    async def verify(task: Any, sandbox: Any) -> Any:
        start = time.monotonic()
        try:
            return await real(task, sandbox)
        finally:
            times.append(time.monotonic() - start)

    return verify


async def main(backend: str, only: list[str]) -> dict[str, Any]:
    make_args: dict[str, Any] = {}
    if backend == "docker":
        from ares.sandbox.docker import DockerConfig, DockerSandboxFactory

        make_args["sandbox_factory"] = DockerSandboxFactory(
            DockerConfig(base_url=os.environ.get("DOCKER_HOST"))
        )
    else:
        from ares.sandbox.local.images import local_builder

        await local_builder().build(FIXTURES / "images" / "toolz", tags=("ares-swe/toolz:1.2.0",))
    results: dict[str, Any] = {}
    for attack in (NULL, TEST_TREE_FORGE, *FLOODS):
        if only and attack.name not in only:
            continue
        times: list[float] = []
        code_env.verify = _timed_verify(times)
        start = time.monotonic()
        status, reward, term, named, error = outcome(*await play(attack, **make_args))
        results[attack.name] = {
            "verify_s": round(times[0], 2) if times else None,
            "episode_s": round(time.monotonic() - start, 2),
            "status": status, "reward": reward, "term": term, "named": named,
            "error": None if error is None else str(error)[:300],
        }  # fmt: skip
    worst = max((r["verify_s"] or 0.0 for r in results.values()), default=0.0)
    machine = machine_info()
    return {
        "bench": "verifier_attacks",
        "backend": backend,
        "machine": machine,
        "worst_verify_s": worst,
        "attacks": results,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("local", "docker"), default="local")
    parser.add_argument("--only", nargs="*", default=[])
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.backend, args.only)), indent=1))
