"""Fixtures shared by the local sandbox tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from ares.sandbox.local import LocalSandbox


@pytest.fixture
async def sandbox() -> AsyncIterator[LocalSandbox]:
    """A started local sandbox with the default spec, stopped after the test."""
    sb = LocalSandbox()
    await sb.start()
    yield sb
    await sb.stop()
