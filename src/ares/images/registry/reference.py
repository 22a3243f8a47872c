"""Image references (`[registry/]repository[:tag][@digest]`) parsed the way podman and docker do."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from ares.images.errors import ImageError

DOCKER_HUB = "docker.io"
# docker.io is a name, not a host: Docker Hub serves the registry API from this endpoint.
DOCKER_HUB_ENDPOINT = "registry-1.docker.io"
_HUB_ALIASES = frozenset({DOCKER_HUB, "index.docker.io", DOCKER_HUB_ENDPOINT})

_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
_HOST = re.compile(
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)(?:\.[A-Za-z0-9-]+)*(?::[0-9]+)?"
    r"|\[[0-9a-fA-F:]+\](?::[0-9]+)?"
)
_TAG = re.compile(r"[\w][\w.-]{0,127}")
_DIGEST = re.compile(r"sha256:[a-f0-9]{64}")


@dataclass(frozen=True)
class Reference:
    """A fully qualified image name; `str()` gives the canonical form, which parses back to itself."""

    registry: str
    repository: str
    tag: str | None = "latest"
    digest: str | None = None

    @property
    def endpoint(self) -> str:
        """The host[:port] that serves the registry API (Docker Hub's differs from its name)."""
        return DOCKER_HUB_ENDPOINT if self.registry == DOCKER_HUB else self.registry

    @property
    def name(self) -> str:
        """`registry/repository`, without tag or digest."""
        return f"{self.registry}/{self.repository}"

    def with_digest(self, digest: str) -> Reference:
        """The same image pinned to a manifest digest (the tag is kept for readability)."""
        return replace(self, digest=validate_digest(digest))

    def __str__(self) -> str:
        text = self.name
        if self.tag is not None:
            text += f":{self.tag}"
        if self.digest is not None:
            text += f"@{self.digest}"
        return text


def validate_digest(digest: str) -> str:
    """Return `digest` if it is `sha256:` + 64 lowercase hex digits, the only algorithm we verify."""
    if not _DIGEST.fullmatch(digest):
        raise ImageError(f"invalid digest {digest!r}: expected 'sha256:' followed by 64 lowercase hex digits")
    return digest


def parse_reference(text: str) -> Reference:
    """Parse an image reference; bare names are Docker Hub's, `library/` prefixed, tag `latest`."""
    remainder, digest = text, None
    if "@" in remainder:
        remainder, digest = remainder.split("@", 1)
        validate_digest(digest)
    tag = None
    slash = remainder.rfind("/")
    colon = remainder.rfind(":")
    if colon > slash:
        remainder, tag = remainder[:colon], remainder[colon + 1 :]
        if not _TAG.fullmatch(tag):
            raise ImageError(f"invalid tag {tag!r} in image reference {text!r}")
    registry, repository = _split_registry(remainder, text)
    if tag is None and digest is None:
        tag = "latest"
    return Reference(registry=registry, repository=repository, tag=tag, digest=digest)


def _split_registry(name: str, text: str) -> tuple[str, str]:
    first, sep, rest = name.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost" or first != first.lower()):
        if not _HOST.fullmatch(first):
            raise ImageError(f"invalid registry host {first!r} in image reference {text!r}")
        registry, repository = first, rest
    else:
        registry, repository = DOCKER_HUB, name
    if registry.lower() in _HUB_ALIASES:
        registry = DOCKER_HUB
    if registry == DOCKER_HUB and "/" not in repository:
        repository = f"library/{repository}"
    if not repository or not all(_COMPONENT.fullmatch(part) for part in repository.split("/")):
        raise ImageError(
            f"invalid repository name {repository!r} in image reference {text!r}: use lowercase letters, "
            "digits and separators (. _ -), components joined by '/'"
        )
    return registry, repository
