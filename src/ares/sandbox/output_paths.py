"""A task's output paths as every backend's verifier fork treats them: absolute, normalized, nested
ones folded into their parent, and never the whole filesystem."""

from __future__ import annotations

import posixpath
from collections.abc import Iterable

from ares.errors import SandboxError


def within(path: str, top: str) -> bool:
    """Whether ``path`` is ``top`` or lies under it."""
    return top == "/" or path == top or path.startswith(top.rstrip("/") + "/")


def output_roots(outputs: Iterable[str]) -> tuple[str, ...]:
    """Absolute, normalized output paths without those inside another one, sorted."""
    paths = sorted({posixpath.normpath(posixpath.join("/", p)) for p in outputs})
    if "/" in paths:
        raise SandboxError('an output path of "/" is the whole filesystem; verify in full mode instead')
    roots: list[str] = []
    for path in paths:
        if not any(within(path, root) for root in roots):
            roots.append(path)
    return tuple(roots)
