"""Helpers of the synth tests: the toolz fixture's names, a stand-in of the mutation piece's
candidates, and what would show a sandbox outliving its trial."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from ares.sandbox.local import workspace
from ares.tasks.swe.harness import swebench_available

IMAGES = Path(__file__).parents[1] / "fixtures" / "swe" / "images"
#: The instance image puts /testbed at pytoolz__toolz-90001's base commit (which has a real bug in
#: ``tail``, so ``test_last`` and ``test_tail`` fail at the baseline: fine, they are never F2P).
TOOLZ_IMAGE = "ares-swe/toolz-90001:synth-test"
ITERTOOLZ = "toolz/itertoolz.py"
TEST_PATHS = ("toolz/tests/test_itertoolz.py",)
#: Marks our suite's processes on the host (see ``suite.PYTEST``).
#: What a suite run's command line holds (this test process itself may hold it too: it is skipped).
SUITE_MARK = b"-rA\x00-p\x00no:cacheprovider"


@dataclass(frozen=True)
class FakeCandidate:
    """The shape validation reads from a mutation: where, the whole new file, the diff hash."""

    path: str
    after: str
    strategy: str = "hand"
    key: str = ""

    def __post_init__(self) -> None:
        if not self.key:
            digest = hashlib.sha256(f"{self.path}\0{self.after}".encode()).hexdigest()[:16]
            object.__setattr__(self, "key", digest)


def _parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def _ours(pid: int) -> bool:
    """Whether ``pid`` descends from this test process (other sessions run pytest in sandboxes too)."""
    me = os.getpid()
    while pid > 1:
        if pid == me:
            return True
        pid = _parent(pid)
    return False


def suite_processes() -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if (
                    int(pid) != os.getpid()
                    and SUITE_MARK in Path(f"/proc/{pid}/cmdline").read_bytes()
                    and _ours(int(pid))
                ):
                    found.append(int(pid))
            except OSError:
                continue
    return found


def sandbox_leaks() -> dict[str, object]:
    """What would show a sandbox outliving its trial: its dir, a mount below it, a suite process."""
    sandboxes = workspace.process_dir() / "sandboxes"
    mountinfo = Path("/proc/self/mountinfo").read_text().splitlines()
    mounts = [line for line in mountinfo if str(sandboxes) in line]
    return {"dirs": sorted(p.name for p in sandboxes.iterdir()), "mounts": mounts, "procs": suite_processes()}


NO_LEAKS = {"dirs": [], "mounts": [], "procs": []}

needs_swebench = pytest.mark.skipif(not swebench_available(), reason="needs swebench (ares[swe])")
