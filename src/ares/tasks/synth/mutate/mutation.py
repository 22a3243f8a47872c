"""One candidate bug: a whole-file before/after pair, and its ``git apply``-able diff."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

_NO_NEWLINE = "\\ No newline at end of file\n"


@dataclass(frozen=True)
class Mutation:
    """A bug in one file: whole sources kept so validation writes ``after`` and combination can merge.

    ``strategy`` names the operator ("flip_comparison", or "combo:a+b" for combinations), ``path`` is
    relative to the repository root (POSIX), ``qualname`` the enclosing function (Python's
    ``__qualname__`` spelling), ``line`` the 1-based line of the change in ``before``.
    """

    strategy: str
    path: str
    qualname: str
    line: int
    description: str
    before: str
    after: str


def diff(m: Mutation, *, context: int = 3) -> str:
    """The mutation as a unified diff with git headers, so ``git apply`` (and ``-R``) accept it."""
    old, new = split_lines(m.before), split_lines(m.after)
    out = [f"diff --git a/{m.path} b/{m.path}\n"]
    lines = difflib.unified_diff(old, new, f"a/{m.path}", f"b/{m.path}", n=context)
    for i, line in enumerate(lines):
        out.append(line)
        if i < 2:  # the ---/+++ headers
            continue
        if not line.endswith("\n"):
            # The file's last line has no newline: git marks it instead of inventing one.
            out.append("\n" + _NO_NEWLINE)
    return "".join(out)


def split_lines(text: str) -> list[str]:
    """Lines as git sees them (split on "\\n" only; ``str.splitlines`` also splits on \\f, \\x1c, ...)."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines
