"""``combine``: several validated bugs of one file merged into one harder task.

Each mutation is a minimal edit of the same ``before``, so combining is a three-way merge: take
each one's changed line ranges against ``before`` and apply them all. Edits whose ranges overlap or
touch conflict (None): a merged result must be exactly "every bug at once", never a blend. This is
sturdier than re-running each operator on the other's output and re-finding its node by position,
which drifts as soon as one edit adds or removes a node the other operator counts.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from .mutation import Mutation, changes, split_lines

_COMBO = "combo:"


def _hunks(base: list[str], mutation: Mutation) -> list[tuple[int, int, list[str]]]:
    """(start, end, new lines) for each changed range of ``base`` lines."""
    new = split_lines(mutation.after)
    return [(i1, i2, new[j1:j2]) for _, i1, i2, j1, j2 in changes(base, new)]


def _parts(strategy: str) -> list[str]:
    return strategy.removeprefix(_COMBO).split("+")


def combine(mutations: Sequence[Mutation]) -> Mutation | None:
    """One mutation applying all of ``mutations`` (same file), or None when two of them conflict.

    Raises ValueError for fewer than two mutations or mutations of different files/versions.
    """
    if len(mutations) < 2:
        raise ValueError("combine needs at least two mutations")
    first = mutations[0]
    for m in mutations[1:]:
        if m.path != first.path:
            raise ValueError(f"cannot combine mutations of different files: {first.path}, {m.path}")
        if m.before != first.before:
            raise ValueError(f"cannot combine mutations of different versions of {first.path}")
    base = split_lines(first.before)
    edits: list[tuple[int, int, list[str], int]] = []
    for index, m in enumerate(mutations):
        hunks = _hunks(base, m)
        if not hunks:
            return None
        edits.extend((start, end, lines, index) for start, end, lines in hunks)
    edits.sort(key=lambda e: (e[0], e[1]))
    for a, b in itertools.pairwise(edits):
        # Sorted by start, so overlapping or touching ranges are neighbours (closed intervals).
        if a[3] != b[3] and b[0] <= a[1]:
            return None
    merged = list(base)
    for start, end, lines, _ in reversed(edits):
        merged[start:end] = lines
    after = "".join(merged)
    if after == first.before or any(after == m.after for m in mutations):
        return None
    try:
        compile(after, first.path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return None
    qualnames = list(dict.fromkeys(q for m in mutations for q in m.qualname.split("+")))
    return Mutation(
        strategy=_COMBO + "+".join(p for m in mutations for p in _parts(m.strategy)),
        path=first.path,
        qualname="+".join(qualnames),
        line=min(m.line for m in mutations),
        description="; ".join(m.description for m in mutations),
        before=first.before,
        after=after,
        author=next((m.author for m in mutations if m.author), None),
    )
