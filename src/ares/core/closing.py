"""Things that hold a resource beyond their own use and release it with ``await aclose()``."""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class AsyncClosable(Protocol):
    """Holds something elsewhere (a warm pool, an HTTP session, a session on a policy server) that
    its owner releases once, when done with it."""

    async def aclose(self) -> None: ...


@runtime_checkable
class Closable(Protocol):
    """Holds something its owner releases with a plain ``close()`` (a sandbox backend's client)."""

    def close(self) -> None: ...
