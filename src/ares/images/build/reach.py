"""Which registries this process found out of reach, so a run learns it once.

With the stand-in fallback on, the first pull that cannot reach a registry host (DNS, connect,
proxy, timeout) records the host; later images from it go straight to their stand-in instead of
waiting on the network again. Until a host's reach is known, one pull at a time probes it (per event
loop); once it answered, pulls from it run in parallel again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

_unreachable: dict[str, str] = {}
_reached: set[str] = set()
_probes: dict[tuple[int, str], asyncio.Lock] = {}


def registry_host(name: str) -> str | None:
    """The registry a pull of ``name`` contacts (None: a local archive or layout, or a bad name)."""
    from ares.images.errors import ImageError
    from ares.images.registry.reference import parse_reference
    from ares.images.sources import split_transport

    try:
        transport, target, _ = split_transport(name)
        return parse_reference(target).registry if transport == "registry" else None
    except ImageError:
        return None


def unreachable_registries() -> dict[str, str]:
    """Host -> why it was out of reach, for each registry found so in this process."""
    return dict(_unreachable)


def why_unreachable(host: str | None) -> str | None:
    return _unreachable.get(host) if host is not None else None


def record(host: str | None, *, reachable: bool, why: str = "") -> None:
    if host is None:
        return
    if reachable:
        _reached.add(host)
        _unreachable.pop(host, None)
    elif host not in _unreachable:
        _unreachable[host] = why


def forget() -> None:
    """Forget every registry's reach (tests; a long-lived process whose network came back)."""
    _unreachable.clear()
    _reached.clear()
    _probes.clear()


@contextlib.asynccontextmanager
async def first_contact(host: str | None) -> AsyncIterator[None]:
    """Held around a pull from ``host`` while its reach is unknown: one probe at a time."""
    if host is None or host in _reached or host in _unreachable:
        yield
        return
    key = (id(asyncio.get_running_loop()), host)
    lock = _probes.setdefault(key, asyncio.Lock())
    async with lock:
        yield
