"""Fixtures of the synth tests: the five fixture projects' full sources (from the SWE fixtures'
bundles), the toolz project installed in an image at one base commit, its pristine ``itertoolz.py``, and
a baseline of its itertoolz tests."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from synth_helpers import IMAGES, ITERTOOLZ, TEST_PATHS, TOOLZ_IMAGE
from synth_sources import BUNDLES, PROJECTS, git

from ares.factory.baseline import Baseline, take_baseline
from ares.sandbox.local.images import image_sandbox, local_builder
from swe_images import project_images

__all__ = ["project_images"]  # the SWE fixtures' images, for the instances test


@pytest.fixture(scope="session")
def clones(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each project's release tree: a clone of the first branch of its fixture bundle (one commit)."""
    base = tmp_path_factory.mktemp("clones")
    out: dict[str, Path] = {}
    for name in PROJECTS:
        bundle = BUNDLES / name / f"{name}.bundle"
        branch = git(base, "bundle", "list-heads", str(bundle)).split()[1].removeprefix("refs/heads/")
        git(base, "clone", "-q", "-b", branch, str(bundle), name)
        out[name] = base / name
    return out


@pytest.fixture(scope="session")
def toolz_image() -> str:
    async def build() -> None:
        builder = local_builder()
        await builder.build(IMAGES / "toolz", tags=("ares-swe/toolz:1.2.0",))
        await builder.build(IMAGES / "instances" / "pytoolz__toolz-90001", tags=(TOOLZ_IMAGE,))

    asyncio.run(build())
    return TOOLZ_IMAGE


@pytest.fixture(scope="session")
def itertoolz_source(toolz_image: str) -> str:
    async def read() -> str:
        sandbox = image_sandbox(await local_builder().from_name(toolz_image))
        await sandbox.start()
        try:
            return (await sandbox.read_file(f"/testbed/{ITERTOOLZ}")).decode()
        finally:
            await sandbox.stop()

    return asyncio.run(read())


@pytest.fixture(scope="module")
def toolz_baseline(toolz_image: str) -> Iterator[Baseline]:
    """One baseline per module (its snapshot is process-wide, not tied to an event loop)."""
    baseline = asyncio.run(take_baseline(toolz_image, TEST_PATHS, timeout_s=300))
    yield baseline
    asyncio.run(baseline.discard())
