"""WarmPool: started sandboxes kept ready per spec, so an environment's ``reset()`` skips the start.

The pool wraps any ``SandboxFactory`` and is one itself. ``pool(spec)`` returns a ``PooledSandbox``
whose ``start()`` takes a ready sandbox of an equal spec (health-checked first) or, on a miss, starts
a fresh one; either way a background task refills the pool. A sandbox leaves the pool for good: its
``stop()`` really stops it, so no episode ever sees another episode's leftovers.

Pooled sandboxes are ordinary backend sandboxes, so the backend's own janitor covers them if the
process dies before ``aclose()``. A pool belongs to the event loop that first starts from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections import deque
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from ares import tracing
from ares.errors import SandboxError
from ares.sandbox.base import Sandbox, SandboxFactory, SandboxSpec
from ares.sandbox.capabilities import NONE, Capability, SnapshotRestoringFactory, declared, require
from ares.sandbox.forwarding import ForwardingSandbox
from ares.sandbox.snapshots import FilesystemSnapshot

log = logging.getLogger(__name__)


def spec_key(value: Any) -> Hashable:
    """A hashable canonical form of a spec: equal specs (even with dict-valued fields) get equal keys."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = tuple((f.name, spec_key(getattr(value, f.name))) for f in dataclasses.fields(value))
        return (type(value).__qualname__, fields)
    if isinstance(value, Mapping):
        return ("mapping", tuple(sorted((str(k), spec_key(v)) for k, v in value.items())))
    if isinstance(value, list | tuple | set | frozenset):
        items = tuple(spec_key(v) for v in value)
        return ("set", tuple(sorted(items, key=repr))) if isinstance(value, set | frozenset) else items
    hash(value)  # anything else must already be hashable; fail loudly rather than key by identity
    return value


@dataclass(frozen=True, slots=True)
class PoolStats:
    """Counters since the pool was made. ``replaced`` counts pooled sandboxes found dead when taken."""

    hits: int
    misses: int
    replaced: int
    refill_failures: int
    ready: int


@dataclass(eq=False)
class _Slot:
    """The ready sandboxes of one spec and the task that refills them."""

    spec: SandboxSpec
    ready: deque[Sandbox] = field(default_factory=deque)
    filler: asyncio.Task[BaseException | None] | None = None


class WarmPool:
    """Keeps ``size`` started sandboxes per spec ready. Use as a ``SandboxFactory``; ``aclose()`` it."""

    def __init__(self, factory: SandboxFactory, *, size: int = 1, health_timeout_s: float = 10.0) -> None:
        if size < 1:
            raise ValueError(f"a warm pool needs size >= 1, got {size}")
        if health_timeout_s <= 0:
            raise ValueError(f"health_timeout_s must be > 0, got {health_timeout_s}")
        self.size = size
        self.health_timeout_s = health_timeout_s
        self._factory = factory
        self._slots: dict[Hashable, _Slot] = {}
        self._closed = False
        self._hits = self._misses = self._replaced = self._refill_failures = 0
        #: The most recent background refill failure (the pool then falls back to fresh starts).
        self.last_refill_error: BaseException | None = None

    def __call__(self, spec: SandboxSpec) -> PooledSandbox:
        return PooledSandbox(self, spec)

    @property
    def capabilities(self) -> frozenset[Capability]:
        """``RESTORE`` exactly when the wrapped factory declares it (snapshots are the factory's)."""
        return declared(self._factory) & {Capability.RESTORE} or NONE

    def _restoring(self) -> SnapshotRestoringFactory:
        return require(
            self._factory, Capability.RESTORE, SnapshotRestoringFactory, purpose="behind a WarmPool"
        )

    def from_snapshot(self, snapshot: FilesystemSnapshot, spec: SandboxSpec) -> Sandbox:
        """A fresh, unstarted sandbox of the wrapped factory holding the snapshot (never a pooled one)."""
        return self._restoring().from_snapshot(snapshot, spec)

    async def export_snapshot(self, snapshot: FilesystemSnapshot, path: Path) -> None:
        await self._restoring().export_snapshot(snapshot, path)

    async def import_snapshot(self, path: Path, spec: SandboxSpec) -> FilesystemSnapshot:
        return await self._restoring().import_snapshot(path, spec)

    async def discard_snapshot(self, snapshot: FilesystemSnapshot) -> None:
        await self._restoring().discard_snapshot(snapshot)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def stats(self) -> PoolStats:
        ready = sum(len(slot.ready) for slot in self._slots.values())
        return PoolStats(self._hits, self._misses, self._replaced, self._refill_failures, ready)

    async def warm(self, spec: SandboxSpec) -> None:
        """Fill the pool for ``spec`` now (rather than after its first miss); raise if that fails."""
        slot = self._slot(spec)
        self._refill(slot)
        if slot.filler is not None and (error := await asyncio.shield(slot.filler)) is not None:
            raise SandboxError(f"the warm pool could not start a sandbox: {error}") from error

    async def aclose(self) -> None:
        """Stop refilling and stop every pooled sandbox. Sandboxes already handed out are not touched."""
        self._closed = True
        fillers = [slot.filler for slot in self._slots.values() if slot.filler is not None]
        for task in fillers:
            task.cancel()
        await asyncio.gather(*fillers, return_exceptions=True)
        idle = [sb for slot in self._slots.values() for sb in slot.ready]
        for slot in self._slots.values():
            slot.ready.clear()
        await asyncio.gather(*(_stop_quietly(sb) for sb in idle))

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # ------------------------------------------------------------------ internals
    def _slot(self, spec: SandboxSpec) -> _Slot:
        if self._closed:
            raise SandboxError("the warm pool is closed; create a new one")
        key = spec_key(spec)
        if key not in self._slots:
            self._slots[key] = _Slot(spec)
        return self._slots[key]

    async def _acquire(self, spec: SandboxSpec) -> Sandbox:
        """A started sandbox for ``spec``: a healthy pooled one if there is one, else a fresh one."""
        slot = self._slot(spec)
        while slot.ready:
            sandbox = slot.ready.popleft()
            self._refill(slot)
            if await self._healthy(sandbox):
                self._hits += 1
                return sandbox
            self._replaced += 1
            await _stop_quietly(sandbox)
        self._misses += 1
        self._refill(slot)
        sandbox = self._factory(spec)
        try:
            await sandbox.start()
        except BaseException as exc:
            await asyncio.shield(_stop_quietly(sandbox))
            if isinstance(exc, Exception) and self.last_refill_error is not None:
                exc.add_note(f"the warm pool's last refill also failed: {self.last_refill_error!r}")
            raise
        return sandbox

    async def _healthy(self, sandbox: Sandbox) -> bool:
        """A cheap liveness check; cancellation while checking stops the sandbox rather than leak it."""
        if not _running(sandbox):
            return False
        try:
            async with asyncio.timeout(self.health_timeout_s + 1.0):
                result = await sandbox.exec("true", cwd="/", timeout_s=self.health_timeout_s)
        except asyncio.CancelledError:
            await asyncio.shield(_stop_quietly(sandbox))
            raise
        except Exception as exc:
            log.info("dropping a dead pooled sandbox: %r", exc)
            return False
        return result.ok

    def _refill(self, slot: _Slot) -> None:
        if self._closed or (slot.filler is not None and not slot.filler.done()):
            return
        slot.filler = asyncio.get_running_loop().create_task(self._fill(slot), name="ares-warm-pool-refill")

    async def _fill(self, slot: _Slot) -> BaseException | None:
        """Start sandboxes one at a time (gentle on small machines) until the slot is full. Traced on
        a track of its own: a refill runs beside the episode that set it off, not inside it."""
        with tracing.span("pool.refill", cat="sandbox", track="warm pool"):
            return await self._fill_slot(slot)

    async def _fill_slot(self, slot: _Slot) -> BaseException | None:
        while not self._closed and len(slot.ready) < self.size:
            sandbox = self._factory(slot.spec)
            try:
                await sandbox.start()
            except asyncio.CancelledError:
                await asyncio.shield(_stop_quietly(sandbox))
                raise
            except Exception as exc:
                self._refill_failures += 1
                self.last_refill_error = exc
                log.warning("warm pool refill failed; resets will start sandboxes themselves: %r", exc)
                await _stop_quietly(sandbox)
                return exc
            slot.ready.append(sandbox)
        return None


class PooledSandbox(ForwardingSandbox, traced=("start",)):
    """The sandbox a ``WarmPool`` hands out: ``start()`` takes one from the pool, the rest forwards.

    Every capability of the backend sandbox (verifier forks, snapshots, loopback listeners, ...) is
    forwarded by name once started (see ``ForwardingSandbox``); before ``start()`` it declares none.
    """

    def __init__(self, pool: WarmPool, spec: SandboxSpec) -> None:
        self._spec = spec
        self._pool = pool
        self._inner: Sandbox | None = None
        self._stopped = False

    @property
    def spec(self) -> SandboxSpec:
        return self._spec

    @property
    def inner(self) -> Sandbox:
        """The backend sandbox this one runs on."""
        if self._inner is None:
            raise SandboxError("the sandbox has not been started; call start() first")
        return self._inner

    def target(self) -> Sandbox:
        return self.inner

    def _present(self) -> Sandbox | None:
        return self._inner

    @property
    def running(self) -> bool:
        return self._inner is not None and not self._stopped and _running(self._inner)

    async def start(self) -> None:
        if self._inner is not None and not self._stopped:
            raise SandboxError("the sandbox is already running")
        self._inner, self._stopped = await self._pool._acquire(self._spec), False

    async def stop(self) -> None:
        """Stop the underlying sandbox for good (pooled sandboxes are never reused). Safe to call twice."""
        self._stopped = True
        if self._inner is not None:
            await self._inner.stop()

    def __repr__(self) -> str:
        return f"PooledSandbox({self._inner!r})"


def _running(sandbox: Sandbox) -> bool:
    """Whether a backend sandbox says it runs; one that does not say is taken to run."""
    running = getattr(type(sandbox), "running", None)
    return bool(sandbox.running) if isinstance(running, property) else True  # type: ignore[attr-defined]


async def _stop_quietly(sandbox: Sandbox) -> None:
    """Stop a sandbox we are discarding; its stop failing must not mask why we discard it."""
    with contextlib.suppress(Exception):
        await sandbox.stop()
