"""Local vs docker backend, same machine, same run: sandbox start and ``exec true`` p50/p95.

Both backends start sandboxes of the same task image (the pytest-app fixture: FROM python:3.11-slim,
RUN pip install pytest, COPY, WORKDIR) after a warm-up start that builds or loads it. The docker
figures need a Docker API engine (``scripts/podman-engine.sh start`` here) and a local image named
``python:3.11-slim`` (the docker tests build a stand-in); without one the docker backend uses its
default image and says so. Targets: local start p50 <= 50 ms; local exec p50 >= 10x faster than docker.

    .venv/bin/python bench/backend_latency.py [--starts 20] [--execs 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from pathlib import Path
from typing import Any

from _common import machine_info, start_exec_figures
from ares.sandbox.base import ImageSpec, SandboxSpec
from ares.sandbox.local import LocalSandbox

#: The task's FROM python:3.11-slim is served by the host-python stand-in on the local backend
#: (offline; set ARES_IMAGE_FALLBACK=off to pull the real image).
os.environ.setdefault("ARES_IMAGE_FALLBACK", "offline")
TASK_ENV = Path(__file__).parents[1] / "tests" / "fixtures" / "harbor" / "pytest-app" / "environment"
TASK_SPEC = SandboxSpec(image=ImageSpec(dockerfile_dir=TASK_ENV), workdir="/app")


async def docker_figures(starts: int, execs: int) -> dict[str, Any]:
    try:
        from ares.sandbox.docker import DockerSandboxFactory
    except ImportError as exc:
        return {"skipped": f"docker extra not installed: {exc}"}
    factory = DockerSandboxFactory()
    try:
        client = factory.engine.client_blocking()  # $DOCKER_HOST, else Docker's, else Podman's socket
        client.ping()
    except Exception as exc:  # no engine: report instead of failing the whole bench
        factory.close()
        return {"skipped": f"no Docker API engine answers: {exc}"}
    try:
        has_base = any("python:3.11-slim" in tag for image in client.images.list() for tag in image.tags)
        spec = TASK_SPEC if has_base else SandboxSpec(workdir="/app")
        result = await start_exec_figures(factory, spec, starts, execs)
        result["image"] = "pytest-app task image" if has_base else "default image (no python stand-in)"
        return result
    finally:
        factory.close()


async def main(starts: int, execs: int) -> dict[str, Any]:
    local = await start_exec_figures(LocalSandbox, TASK_SPEC, starts, execs)
    local["image"] = "pytest-app task image"
    docker = await docker_figures(starts, execs)
    out: dict[str, Any] = {"bench": "backend_latency", "machine": machine_info()}
    out.update(local=local, docker=docker)
    if "exec_true" in docker:
        out["docker_over_local"] = {
            "start_p50": round(docker["start"]["p50_ms"] / local["start"]["p50_ms"], 1),
            "exec_p50": round(docker["exec_true"]["p50_ms"] / local["exec_true"]["p50_ms"], 1),
        }
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--starts", type=int, default=20)
    parser.add_argument("--execs", type=int, default=100)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.starts, args.execs)), indent=2))
