"""Generated seccomp profiles for engines that take a profile's path, not the profile itself.

Docker's API takes the profile's JSON in ``security_opt`` (its CLI reads the file and sends the
content); podman's Docker-compatible API takes a path on the engine's host and refuses JSON
("opening seccomp profile failed: open {...}: file name too long"). The first such refusal switches
the engine to files (``DockerEngine.seccomp_as_file``): each profile is written once, named by its
hash, under the ARES cache, where an engine on this host reads it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
from collections.abc import Sequence
from pathlib import Path

import docker.errors

from ares.images.cache import default_cache_dir
from ares.sandbox.docker.client import api_message

INLINE = "seccomp={"


def refused_inline(exc: docker.errors.APIError) -> bool:
    """Whether the engine read a JSON profile as a path (podman)."""
    message = api_message(exc)
    return "seccomp profile" in message and ("file name too long" in message or "no such file" in message)


def as_files(security_opt: Sequence[str], directory: Path | None = None) -> list[str]:
    """``security_opt`` with each inline profile replaced by the path of a file holding it."""
    return [
        "seccomp=" + str(profile_file(opt.removeprefix("seccomp="), directory))
        if opt.startswith(INLINE)
        else opt
        for opt in security_opt
    ]


def profile_file(profile: str, directory: Path | None = None) -> Path:
    """The file holding ``profile`` (written atomically on first use; the same profile, the same file)."""
    root = (directory or default_cache_dir()) / "seccomp"
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"{hashlib.sha256(profile.encode()).hexdigest()[:32]}.json"
    if not path.exists():
        staged = root / f".{path.name}.{secrets.token_hex(4)}"
        try:
            staged.write_text(profile)
            staged.chmod(0o644)
            os.replace(staged, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                staged.unlink()
    return path
