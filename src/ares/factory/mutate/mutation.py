"""One candidate bug: a whole-file before/after pair, and its ``git apply``-able diff."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

_NO_NEWLINE = "\\ No newline at end of file\n"

Opcode = tuple[str, int, int, int, int]


@dataclass(frozen=True)
class Mutation:
    """A bug in one file: whole sources kept so validation writes ``after`` and combination can merge.

    ``strategy`` names the operator ("flip_comparison", or "combo:a+b" for combinations), ``path`` is
    relative to the repository root (POSIX), ``qualname`` the enclosing function (Python's
    ``__qualname__`` spelling), ``line`` the 1-based line of the change in ``before``; ``author`` the
    policy spec that wrote it (LLM strategies), None for the procedural operators.
    """

    strategy: str
    path: str
    qualname: str
    line: int
    description: str
    before: str
    after: str
    author: str | None = None


def split_lines(text: str) -> list[str]:
    """Lines as git sees them (split on "\\n" only; ``str.splitlines`` also splits on \\f, \\x1c, ...)."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def changes(a: list[str], b: list[str]) -> list[Opcode]:
    """The non-equal opcodes turning lines ``a`` into ``b``, minimal for a local edit.

    The common prefix and suffix are cut off first: difflib on whole files (``unified_diff``) junks
    "popular" lines such as blanks and docstring quotes and can then pair a change with a far-away
    look-alike region, giving a correct but hundred-line diff for a one-token edit.
    """
    limit = min(len(a), len(b))
    head = 0
    while head < limit and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < limit - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    matcher = difflib.SequenceMatcher(None, a[head : len(a) - tail], b[head : len(b) - tail], autojunk=False)
    return [
        (tag, i1 + head, i2 + head, j1 + head, j2 + head)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
        if tag != "equal"
    ]


def _range(start: int, stop: int) -> str:
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start if length == 0 else start + 1},{length}"


def _emit(out: list[str], prefix: str, lines: list[str]) -> None:
    for line in lines:
        out.append(prefix + line)
        if not line.endswith("\n"):
            # The file's last line has no newline: git marks it instead of inventing one.
            out.append("\n" + _NO_NEWLINE)


def diff(m: Mutation, *, context: int = 3) -> str:
    """The mutation as a unified diff with git headers, so ``git apply`` (and ``-R``) accept it."""
    a, b = split_lines(m.before), split_lines(m.after)
    ops = changes(a, b)
    out = [f"diff --git a/{m.path} b/{m.path}\n", f"--- a/{m.path}\n", f"+++ b/{m.path}\n"]
    groups: list[list[Opcode]] = []
    for op in ops:
        if groups and op[1] - groups[-1][-1][2] <= 2 * context:
            groups[-1].append(op)
        else:
            groups.append([op])
    for group in groups:
        first, last = group[0], group[-1]
        start_a = max(0, first[1] - context)
        end_a = min(len(a), last[2] + context)
        start_b = first[3] - (first[1] - start_a)
        end_b = last[4] + (end_a - last[2])
        out.append(f"@@ -{_range(start_a, end_a)} +{_range(start_b, end_b)} @@\n")
        position = start_a
        for _, i1, i2, j1, j2 in group:
            _emit(out, " ", a[position:i1])
            _emit(out, "-", a[i1:i2])
            _emit(out, "+", b[j1:j2])
            position = i2
        _emit(out, " ", a[position:end_a])
    return "".join(out)
