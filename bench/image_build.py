"""Image builds and starts from a built image on the local backend.

Builds the pytest-app fixture task (FROM python:3.11-slim, RUN pip install pytest, COPY, WORKDIR)
into a fresh cache (cold: includes the pip download), again (every layer cached), and after editing a
copied file (only the steps from COPY on rebuild); then times sandbox start and exec from the cached
image. Targets: start p50 <= 50 ms from a cached image.

With ``--debian`` it also times a cold ``FROM debian:bookworm-slim`` build in its own fresh cache
(debootstrap of the base, then ``apt-get install jq``) and the cached rebuild.

    .venv/bin/python bench/image_build.py [--starts 30] [--execs 200] [--debian]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import machine_info, start_exec_figures
from ares.images.build.builder import ImageBuilder, LocalImage
from ares.images.cache import ImageCache
from ares.sandbox.base import SandboxSpec
from ares.sandbox.local.images import local_builder

#: The fixture Dockerfiles name python:3.11-slim / debian:bookworm-slim; this benchmark times the
#: stand-ins that serve them offline (ARES_IMAGE_FALLBACK overrides, e.g. off to time real pulls).
FALLBACK = os.environ.get("ARES_IMAGE_FALLBACK", "offline")
TASK_ENV = Path(__file__).parents[1] / "tests" / "fixtures" / "harbor" / "pytest-app" / "environment"


async def timed_build(builder: ImageBuilder, context: Path) -> tuple[LocalImage, float]:
    t0 = time.perf_counter()
    image = await builder.build(context)
    return image, time.perf_counter() - t0


DEBIAN_DOCKERFILE = (
    "FROM debian:bookworm-slim\n"
    "RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends jq >/dev/null\n"
)


async def debian_figures(workdir: Path) -> dict[str, Any]:
    context = workdir / "debian"
    context.mkdir()
    (context / "Dockerfile").write_text(DEBIAN_DOCKERFILE)
    builder = local_builder(ImageCache(workdir / "debian-cache"), fallback=FALLBACK)
    _, cold_s = await timed_build(builder, context)
    cached, cached_s = await timed_build(builder, context)
    assert cached.cached
    return {"build_cold_s": round(cold_s, 2), "build_cached_s": round(cached_s, 4)}


async def main(starts: int, execs: int, debian: bool = False) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="ares-bench-images-"))
    try:
        context = workdir / "context"
        shutil.copytree(TASK_ENV, context)
        builder = local_builder(ImageCache(workdir / "cache"), fallback=FALLBACK)
        cold, cold_s = await timed_build(builder, context)
        cached, cached_s = await timed_build(builder, context)
        assert cached.cached and cached.key == cold.key
        (context / "src" / "inventory.py").write_text(
            (context / "src" / "inventory.py").read_text() + "\n# edit\n"
        )
        edited, edited_s = await timed_build(builder, context)
        rebuilt = [s.instruction for s in edited.steps if not s.cached]
        local = await start_exec_figures(edited.sandbox, SandboxSpec(workdir="/app"), starts, execs)
        local["layers"] = len(edited.plan.mounts[0].lower)
        debian_result = await debian_figures(workdir) if debian else None
    finally:
        from ares.sandbox.local.janitor import remove_tree

        remove_tree(workdir)
    return {
        "bench": "image_build",
        "machine": machine_info(),
        "task": "tests/fixtures/harbor/pytest-app",
        "build_cold_s": round(cold_s, 3),
        "build_cached_s": round(cached_s, 4),
        "build_after_copy_edit_s": round(edited_s, 3),
        "rebuilt_after_edit": rebuilt,
        "local_from_cached_image": local,
        "debian_bookworm_with_jq": debian_result,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--starts", type=int, default=30)
    parser.add_argument("--execs", type=int, default=200)
    parser.add_argument("--debian", action="store_true", help="also time a cold debootstrap-based build")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.starts, args.execs, args.debian)), indent=2))
