"""Bounds on what a verifier carries of an agent's outputs, the same for every backend.

The agent decides how many entries its output dirs hold, how large and how sparse its files are,
how deep its trees go, what kinds of files it leaves and with which modes. Everything the verifier
does with them afterwards (carry, filter, ``git diff``, the tests) costs time in proportion, so the
carry checks each entry it visits against ``CarryBounds`` by metadata alone (lstat or a tar header:
no byte of a file is read to judge it) and stops at the first one that breaks a bound with an
``OutputRefusedError`` naming the reason. The verifier scores that 0 (term ``refused_<reason>``), so
breaking a bound is never a way to end an episode ``errored``. The reasons:

* ``too_many_entries``: more than ``max_entries`` entries visited below the outputs;
* ``file_too_large``: a file whose size is over ``max_file_bytes``; ``too_large``: files over
  ``max_total_bytes`` together;
* ``sparse_file``: a file whose size exceeds the blocks it holds by more than ``sparse_slack``;
* ``special_file``: a FIFO, socket or device (an overlay whiteout, a 0/0 device, is a deletion);
* ``too_deep``: more than ``max_depth`` components below an output; ``path_too_long``: a path of
  more than ``max_path_bytes`` bytes;
* ``unreadable``: a dir whose owner may not list it (mode without u+rx) or a file without u+r, or
  one the host cannot read (the same verdict as root and as an unprivileged user);
* ``too_slow``: the carry took longer than ``deadline_s``.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from dataclasses import dataclass

from ares.errors import OutputRefusedError

REASONS = (
    "too_many_entries",
    "file_too_large",
    "too_large",
    "sparse_file",
    "special_file",
    "too_deep",
    "path_too_long",
    "unreadable",
    "too_slow",
)
#: The clock is read once per this many entries.
_CLOCK_EVERY = 256


@dataclass(frozen=True, slots=True)
class CarryBounds:
    """Bounds of one verifier carry (all of a task's outputs together)."""

    max_entries: int = 100_000
    max_file_bytes: int = 256 << 20
    max_total_bytes: int = 2 << 30
    sparse_slack: int = 1 << 20
    max_depth: int = 96
    max_path_bytes: int = 3072
    deadline_s: float = 120.0


DEFAULT_BOUNDS = CarryBounds()


class CarryBudget:
    """What one carry has used of its ``CarryBounds``; every check raises ``OutputRefusedError``."""

    def __init__(self, bounds: CarryBounds = DEFAULT_BOUNDS) -> None:
        self.bounds = bounds
        self.visited = 0
        self.bytes = 0
        self._started = time.monotonic()

    def visit(self, path: str, depth: int) -> None:
        """One more entry at ``path`` (absolute, in the sandbox), ``depth`` components below its output."""
        self.visited += 1
        bounds = self.bounds
        if self.visited > bounds.max_entries:
            raise OutputRefusedError("too_many_entries", f"more than {bounds.max_entries} entries")
        if depth > bounds.max_depth:
            raise OutputRefusedError("too_deep", f"{_shown(path)} is over {bounds.max_depth} levels deep")
        if len(os.fsencode(path)) > bounds.max_path_bytes:
            raise OutputRefusedError("path_too_long", f"a path of more than {bounds.max_path_bytes} bytes")
        if self.visited % _CLOCK_EVERY == 0:
            self.clock()

    def clock(self) -> None:
        if time.monotonic() - self._started > self.bounds.deadline_s:
            raise OutputRefusedError("too_slow", f"reading the outputs took over {self.bounds.deadline_s:g}s")

    def check(self, path: str, mode: int, size: int, blocks: int | None = None, rdev: int = 0) -> None:
        """The entry's kind, mode and size (``blocks``: 512-byte blocks it holds, when known)."""
        bounds = self.bounds
        if stat.S_ISDIR(mode):
            if mode & 0o500 != 0o500:
                raise OutputRefusedError("unreadable", f"{_shown(path)} is a dir its owner may not list")
        elif stat.S_ISREG(mode):
            if not mode & 0o400:
                raise OutputRefusedError("unreadable", f"{_shown(path)} is a file its owner may not read")
            if size > bounds.max_file_bytes:
                raise OutputRefusedError(
                    "file_too_large", f"{_shown(path)} is {size} bytes (over {bounds.max_file_bytes})"
                )
            if blocks is not None and size - blocks * 512 > bounds.sparse_slack:
                raise OutputRefusedError(
                    "sparse_file", f"{_shown(path)} is {size} bytes but holds {blocks * 512} (a sparse file)"
                )
            self.bytes += size
            if self.bytes > bounds.max_total_bytes:
                raise OutputRefusedError("too_large", f"the files are over {bounds.max_total_bytes} bytes")
        elif stat.S_ISLNK(mode):
            return
        elif not (stat.S_ISCHR(mode) and rdev == 0):
            raise OutputRefusedError("special_file", f"{_shown(path)} is a FIFO, socket or device")

    def check_stat(self, path: str, st: os.stat_result) -> None:
        self.check(path, st.st_mode, st.st_size, st.st_blocks, st.st_rdev)


def refusal_of(exc: OSError, path: str) -> OutputRefusedError | None:
    """The refusal an ``OSError`` on an agent's entry amounts to (None: not the agent's doing)."""
    if exc.errno in (errno.EACCES, errno.EPERM):
        return OutputRefusedError("unreadable", f"{_shown(path)} cannot be read ({exc.strerror})")
    if exc.errno == errno.ENAMETOOLONG:
        return OutputRefusedError("path_too_long", f"a path below {_shown(path)} is too long")
    return None


def _shown(path: str) -> str:
    text = os.fsencode(path).decode("utf-8", "backslashreplace")
    return text if len(text) <= 200 else text[:100] + "…" + text[-99:]
