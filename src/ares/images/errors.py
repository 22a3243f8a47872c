"""The one error type of `ares.images`, so callers can catch image trouble apart from sandbox trouble."""

from __future__ import annotations

from ares.errors import AresError


class ImageError(AresError):
    """An image could not be resolved, fetched or verified; the message names the image and a remedy."""
