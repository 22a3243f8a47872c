"""Suite-wide settings: images built by the tests go to a cache of this session, not ~/.cache/ares, and
the stand-in fallback is on (``ARES_IMAGE_FALLBACK=offline``): ``FROM python:3.11-slim`` or ``FROM
debian:bookworm`` in the fixtures build offline on ``ares/host-python`` / ``ares/debian:bookworm``,
recorded as substitutions. Tests of the fallback itself set it per test."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings

from ares.sandbox.local import janitor

# Tests assert behaviour, never timing: no property test fails because a loaded CI machine ran one
# example past hypothesis's default 200 ms deadline.
settings.register_profile("ares", deadline=None)
settings.load_profile("ares")

_SESSION_CACHE: Path | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _SESSION_CACHE
    os.environ.setdefault("ARES_IMAGE_FALLBACK", "offline")
    if "ARES_CACHE_DIR" not in os.environ:
        _SESSION_CACHE = Path(tempfile.mkdtemp(prefix="ares-test-cache-"))
        os.environ["ARES_CACHE_DIR"] = str(_SESSION_CACHE)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _SESSION_CACHE is not None:
        janitor.remove_tree(_SESSION_CACHE)
        os.environ.pop("ARES_CACHE_DIR", None)


@pytest.fixture(autouse=True)
def _registry_reach_unknown() -> None:
    """Each test starts not knowing which registries are out of reach (``ares.images.build.reach``
    remembers it per process, and tests make registries unreachable on purpose)."""
    from ares.images.build import reach

    reach.forget()
