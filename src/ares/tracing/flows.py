"""Flow ids: one number that every process derives alike from the same parts.

A flow links spans in different processes (dispatch in the driver, the episode in a Ray actor, its
policy calls back in the driver) without passing a span context around: each side computes
``flow_id("episode", run, index)`` itself. The id is a keyed hash of the parts, never Python's
``hash()`` (salted per process), and stays below 2**53 so JSON readers keep it exact.
"""

from __future__ import annotations

import hashlib
import re

_MAX = 1 << 53
#: The repr of an object without a repr of its own holds its address: different in every process.
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+>$")


def flow_id(*parts: object) -> int:
    """A positive int < 2**53 from ``parts``: the same in every process and every run.

    Strings count by their text, other values by ``repr`` (so ``1`` and ``"1"`` differ); a value
    whose repr is an address (an object without ``__repr__``) is refused, as it differs per process.
    """
    if not parts:
        raise TypeError("flow_id needs at least one part")
    text = "\x1f".join(_part(p) for p in parts)
    digest = hashlib.blake2b(text.encode(), digest_size=8, person=b"ares.flow").digest()
    return int.from_bytes(digest, "big") % (_MAX - 1) + 1


def _part(value: object) -> str:
    if isinstance(value, str):
        return "s" + value
    text = repr(value)
    if _ADDRESS.search(text):
        raise TypeError(
            f"flow_id cannot use {text}: its repr differs in every process; pass a stable id "
            "(a string, a number, or a value with its own __repr__)"
        )
    return "r" + text
