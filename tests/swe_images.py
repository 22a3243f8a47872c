"""The SWE fixtures' project images, built once per session (for the task and factory tests)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ares.sandbox.local.images import local_builder

FIXTURES = Path(__file__).parent / "fixtures" / "swe"
#: The fixture projects and the tags their per-instance Dockerfiles start FROM.
PROJECTS = {
    "toolz": "1.2.0",
    "tomlkit": "0.15.2",
    "marshmallow": "4.4.0",
    "boltons": "26.2.0",
    "click": "8.5.1",
}


@pytest.fixture(scope="session")
def project_images() -> None:
    """The per-project images (``ares-swe/<project>:<version>``), cached by the builder."""

    async def build() -> None:
        builder = local_builder()
        for name, version in PROJECTS.items():
            await builder.build(FIXTURES / "images" / name, tags=(f"ares-swe/{name}:{version}",))

    asyncio.run(build())
