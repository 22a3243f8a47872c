"""Which image a sandbox really runs: what the task asked for, and what served it.

Recorded on every episode (``Episode.image``) so a trainer can tell a pulled image from a stand-in
that served it offline, and two runs of "the same" tag apart when the tag moved.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True, slots=True)
class ImageIdentity:
    """``requested``: the image name the task gave, or its Dockerfile dir (None: the backend's
    default base). ``source``: ``registry``, ``oci``, ``docker-archive``, ``build`` (a Dockerfile),
    ``host`` (the host's system dirs), ``engine`` (a Docker/Podman engine's image) or ``cloud``.
    ``digest``: the manifest digest of a pulled image, the build key of a built one, the engine's
    image id. ``base``: for a built image, what its layers stand on as it ran (a digest-pinned
    reference or a stand-in name). ``served_by``: the stand-in that served a named image because
    the user turned the offline fallback on; None when the named image itself ran."""

    requested: str | None
    source: str
    digest: str | None = None
    base: str | None = None
    served_by: str | None = None

    def to_dict(self) -> dict[str, str | None]:
        return asdict(self)
