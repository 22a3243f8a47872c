"""Fixtures of the proxy tests: a started proxy on loopback, stopped after each test."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from ares.proxy import InterceptionProxy

pytest.register_assert_rewrite("proxy_kit")  # its shared checks explain their failures like a test's


@pytest.fixture
async def proxy() -> AsyncIterator[InterceptionProxy]:
    async with InterceptionProxy(call_timeout_s=30) as started:
        yield started
