"""Where an image's bytes come from, chosen by the name's transport prefix (see ``base.py``)."""

from __future__ import annotations

import os
from pathlib import Path

from ares.images.errors import ImageError
from ares.images.registry import Platform, RegistryClient
from ares.images.sources.base import ChunkSink, ImageSource, LayerProgress, SourceImage, SourceLayer

__all__ = [
    "ChunkSink",
    "ImageSource",
    "LayerProgress",
    "SourceImage",
    "SourceLayer",
    "open_source",
    "split_transport",
]

#: Transports a name may start with; anything else is a registry reference.
LOCAL_TRANSPORTS = ("oci", "docker-archive")


def split_transport(name: str) -> tuple[str, str, str | None]:
    """``(transport, path or reference, tag)``: ``oci:PATH[:TAG]``, ``docker-archive:PATH`` or a reference."""
    transport, sep, rest = name.partition(":")
    if not sep or transport not in LOCAL_TRANSPORTS:
        return "registry", name, None
    if not rest:
        raise ImageError(f"{name!r}: {transport}: needs a path")
    if transport == "oci":
        path, colon, tag = rest.rpartition(":")
        if colon and path and "/" not in tag:
            return transport, path, tag or None
    else:  # docker-archive:PATH[:NAME], NAME choosing among the archive's RepoTags (as skopeo)
        path, colon, wanted = rest.partition(":")
        if colon and path and wanted and os.path.isfile(path):
            return transport, path, wanted
    return transport, rest, None


def open_source(
    name: str, *, platform: Platform | None = None, client: RegistryClient | None = None
) -> ImageSource:
    """The source for ``name``: a registry reference, ``oci:PATH[:TAG]`` or ``docker-archive:PATH``.

    ``client`` is used for registry references (and closed by its owner, not by the source).
    """
    transport, target, tag = split_transport(name)
    if transport == "oci":
        from ares.images.sources.oci_layout import OciLayoutSource

        return OciLayoutSource(Path(target), tag, platform)
    if transport == "docker-archive":
        from ares.images.sources.docker_archive import DockerArchiveSource

        return DockerArchiveSource(Path(target), tag, platform)
    from ares.images.sources.registry import RegistrySource

    return RegistrySource(target, platform=platform, client=client)
