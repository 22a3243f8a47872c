"""What the two file sources (an OCI layout directory, an image archive) share besides reading blobs."""

from __future__ import annotations

import asyncio

from ares.images.sources.base import SourceImage


class ResolvedOnce:
    """A source whose image is read from files once, in a worker thread, whoever asks first.

    Subclasses call ``super().__init__()`` and implement ``_resolve`` (blocking); concurrent
    ``resolve`` calls wait for the one read rather than repeating it.
    """

    def __init__(self) -> None:
        self._image: SourceImage | None = None
        self._lock = asyncio.Lock()

    async def resolve(self) -> SourceImage:
        async with self._lock:
            if self._image is None:
                self._image = await asyncio.to_thread(self._resolve)
            return self._image

    async def aclose(self) -> None:
        """Nothing is held open between calls: each read opens and closes its own file or handle."""

    def _resolve(self) -> SourceImage:
        raise NotImplementedError
