"""The installed project, its suite run once, frozen as a snapshot that every candidate forks.

Installing a project takes seconds to minutes; a fork of the snapshot starts in milliseconds with
the install (and pytest's bytecode) already there. Tests that did not pass here can never be
FAIL_TO_PASS, so only the passing set is kept for the verdicts. The suite runs a second time in a
fork: a test that passes in only one of the two runs, or whose id changes between them (a
parametrize id made from the clock or a random value), is ``unstable`` and left out of every task.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass

from ares.errors import AresError
from ares.factory.suite import SuiteRun, run_suite
from ares.sandbox.base import IMAGE_WORKDIR, ImageSpec, SandboxSpec
from ares.sandbox.local import LocalSandbox
from ares.sandbox.snapshots import FilesystemSnapshot
from ares.tasks.swe.grading import TestStatus

TESTBED = "/testbed"


class BaselineError(AresError, ValueError):
    """The installed project cannot serve as a baseline (no test passes, or the suite hung)."""


@dataclass(frozen=True, slots=True)
class Baseline:
    """A snapshot of the image after one suite run, and which tests passed in it."""

    spec: SandboxSpec
    snapshot: FilesystemSnapshot
    test_paths: tuple[str, ...]
    statuses: Mapping[str, TestStatus]
    seconds: float
    testbed: str = TESTBED
    unstable: frozenset[str] = frozenset()

    @property
    def passed(self) -> frozenset[str]:
        return _passed(self.statuses) - self.unstable

    def fork(self) -> LocalSandbox:
        """An unstarted sandbox of the image plus the snapshot (nothing reinstalled)."""
        return LocalSandbox.from_snapshot(self.snapshot, self.spec)

    async def discard(self) -> None:
        """Free the snapshot's layers (once no fork of it runs)."""
        await LocalSandbox.discard_snapshot(self.snapshot)


def _passed(statuses: Mapping[str, TestStatus]) -> frozenset[str]:
    return frozenset(name for name, status in statuses.items() if status == TestStatus.PASSED)


def _refusal(run: SuiteRun, passed: int) -> str | None:
    if run.timed_out:
        return f"the baseline suite timed out after {run.seconds:.0f}s"
    if passed == 0:
        last = run.tail.strip().splitlines()[-1:] or ["(no output)"]
        return f"no test passed at the baseline (pytest exit {run.exit_code}: {last[0][:200]})"
    return None


async def take_baseline(
    image: ImageSpec | str, test_paths: Sequence[str], *, timeout_s: float = 600.0, testbed: str = TESTBED
) -> Baseline:
    """Run the suite once in a sandbox of ``image`` (network off) and snapshot it; the sandbox stops."""
    if not test_paths:
        raise BaselineError("no test paths to run")
    image_spec = ImageSpec(name=image) if isinstance(image, str) else image
    spec = SandboxSpec(image=image_spec, network=False, workdir=IMAGE_WORKDIR)
    sandbox = LocalSandbox(spec)
    await sandbox.start()
    try:
        run = await run_suite(sandbox, test_paths, cwd=testbed, timeout_s=timeout_s)
        refusal = _refusal(run, sum(status == TestStatus.PASSED for status in run.statuses.values()))
        if refusal is not None:
            raise BaselineError(refusal)
        snapshot = await sandbox.snapshot()
    finally:
        await sandbox.stop()
    try:
        again = await _run_again(snapshot, spec, test_paths, testbed, timeout_s)
    except BaseException:
        await LocalSandbox.discard_snapshot(snapshot)
        raise
    unstable = _passed(run.statuses) ^ _passed(again.statuses)
    return Baseline(spec, snapshot, tuple(test_paths), run.statuses, run.seconds, testbed, unstable)


async def _run_again(
    snapshot: FilesystemSnapshot, spec: SandboxSpec, test_paths: Sequence[str], testbed: str, timeout_s: float
) -> SuiteRun:
    """The suite once more, in a fork of the snapshot (as every candidate will run)."""
    fork = LocalSandbox.from_snapshot(snapshot, spec)
    await fork.start()
    try:
        run = await run_suite(fork, test_paths, cwd=testbed, timeout_s=timeout_s)
    finally:
        await fork.stop()
    if run.timed_out:
        raise BaselineError(f"the baseline suite's second run timed out after {run.seconds:.0f}s")
    return run


@contextlib.asynccontextmanager
async def baseline_of(
    image: ImageSpec | str, test_paths: Sequence[str], *, timeout_s: float = 600.0, testbed: str = TESTBED
) -> AsyncIterator[Baseline]:
    """``take_baseline`` whose snapshot is discarded on exit."""
    baseline = await take_baseline(image, test_paths, timeout_s=timeout_s, testbed=testbed)
    try:
        yield baseline
    finally:
        await baseline.discard()
