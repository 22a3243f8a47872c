"""The release seam: environments that can free their sandbox while an episode waits, and get it back.

A trainer's pause can last long (a large update, an evaluation); meanwhile every held episode keeps
a sandbox up, its memory and its slot of a pool. ``release()`` snapshots the episode's sandbox and
stops it, the episode staying at its step with its observation pending; ``reacquire()`` restores
the sandbox from that snapshot, and the episode goes on as if nothing happened. A ``CodeEnvironment``
offers them where its backend, sandbox factory and agent can snapshot (``SnapshotError`` where not).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class ReleasingEnvironment(Protocol):
    """``release()`` frees the sandbox of an episode waiting for the policy (``SnapshotError``: it
    cannot, and keeps it); ``reacquire()`` brings it back at the same step (a no-op unless
    released). ``step()`` refuses a released episode, and ``close()`` frees its snapshot."""

    async def release(self) -> None: ...

    async def reacquire(self) -> None: ...


#: The members of the release seam, which a ``Wrapper`` forwards by name when its environment has them.
RELEASE_MEMBERS = ("release", "reacquire")
