"""The Docker API engine kit (tests/sandbox/docker/docker_engine_kit.py) for tests in other folders.

pytest puts each test's own folder on ``sys.path``; tests outside tests/sandbox/docker load the kit
through here (this folder is on the path through the suite's conftest.py), once per session.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

KIT = Path(__file__).resolve().parent / "sandbox" / "docker" / "docker_engine_kit.py"


def docker_kit() -> ModuleType:
    """The kit module: ``ensure_engine()``, ``BASE_IMAGE``, ..."""
    if (loaded := sys.modules.get(KIT.stem)) is not None:
        return loaded
    spec = importlib.util.spec_from_file_location(KIT.stem, KIT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[KIT.stem] = module
    spec.loader.exec_module(module)
    return module


# Fixtures, shared by the folders whose conftest.py imports them.


@pytest.fixture(scope="module")
def engine_url() -> str:
    """The engine's Docker API URL; the test is skipped, saying why, when there is none."""
    try:
        return str(docker_kit().ensure_engine().base_url)
    except RuntimeError as exc:
        pytest.skip(f"no Docker API engine for the docker backend tests: {exc}")


@pytest.fixture
def factory(engine_url: str) -> Iterator[Any]:
    """A ``DockerSandboxFactory`` on that engine, closed after the test."""
    from ares.sandbox.docker import DockerConfig, DockerSandboxFactory

    made = DockerSandboxFactory(DockerConfig(base_url=engine_url))
    yield made
    made.close()
