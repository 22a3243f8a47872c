"""One candidate bug tried in forks of the baseline: write the mutated file, run the suite, judge.

Each run is a fresh fork, so a run cannot see what an earlier one left behind; a second run must give
the same FAIL_TO_PASS set, or the candidate is flaky (and the tests that differed are recorded).
Forks are stopped whatever happens (timeouts, errors, cancellation): a mutation that loops forever is
killed with its whole process tree by the sandbox's exec timeout.
"""

from __future__ import annotations

import asyncio
import shlex
import time
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any, Protocol

from ares.factory.baseline import Baseline
from ares.factory.statements import block_name
from ares.factory.suite import SuiteRun, run_suite
from ares.factory.verdict import Bounds, Reason, judge, still_passing
from ares.sandbox.local import LocalSandbox

DEFAULT_TIMEOUT_S = 60.0


class Candidate(Protocol):
    """What validation needs of a candidate bug (a ``Mutation`` and its diff hash give these)."""

    @property
    def path(self) -> str: ...  # relative to the repository root
    @property
    def after(self) -> str: ...  # the whole mutated file
    @property
    def key(self) -> str: ...  # a hash of the diff: equal diffs are one candidate


@dataclass(frozen=True, slots=True)
class Trial:
    """What validation concluded for one candidate (one line of a results file)."""

    key: str
    path: str
    strategy: str
    reason: Reason
    fail_to_pass: tuple[str, ...] = ()
    pass_to_pass: tuple[str, ...] = ()
    flaky_tests: tuple[str, ...] = ()
    runs: int = 0
    seconds: float = 0.0
    detail: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def kept(self) -> bool:
        return self.reason is Reason.KEPT

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key, "path": self.path, "strategy": self.strategy, "reason": self.reason.value,
            "fail_to_pass": list(self.fail_to_pass), "pass_to_pass": list(self.pass_to_pass),
            "flaky_tests": list(self.flaky_tests), "runs": self.runs, "seconds": round(self.seconds, 3),
            "detail": self.detail, **({"extra": self.extra} if self.extra else {}),
        }  # fmt: skip

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Trial:
        return cls(
            key=str(data["key"]), path=str(data["path"]), strategy=str(data.get("strategy", "")),
            reason=Reason(data["reason"]), fail_to_pass=tuple(data.get("fail_to_pass", ())),
            pass_to_pass=tuple(data.get("pass_to_pass", ())), flaky_tests=tuple(data.get("flaky_tests", ())),
            runs=int(data.get("runs", 0)), seconds=float(data.get("seconds", 0.0)),
            detail=str(data.get("detail", "")), extra=dict(data.get("extra", {})),
        )  # fmt: skip


def strategy_of(candidate: Candidate) -> str:
    return str(getattr(candidate, "strategy", "") or "unknown")


def touches_tests_only(baseline: Baseline, path: str) -> bool:
    """A bug in a test file is not a bug in the project (the tests are the task's oracle)."""
    pure = PurePosixPath(path)
    in_tests = any(pure == PurePosixPath(t) or PurePosixPath(t) in pure.parents for t in baseline.test_paths)
    test_file = pure.name == "conftest.py" or pure.name.startswith("test_") or pure.stem.endswith("_test")
    return in_tests or test_file


def _checked_path(path: str) -> str:
    pure = PurePosixPath(path)
    if pure.is_absolute() or ".." in pure.parts or not pure.parts:
        raise ValueError(f"a candidate's path must be relative to the repository root: {path!r}")
    return str(pure)


async def _run_in_fork(baseline: Baseline, path: str, source: str, timeout_s: float) -> SuiteRun:
    """A fresh fork with the mutated file (and its stale bytecode gone), the suite run once; stopped."""
    fork = baseline.fork()
    try:
        await fork.start()
        await fork.upload({path: source}, baseline.testbed)
        pure = PurePosixPath(baseline.testbed, path)
        await fork.exec(f"rm -f {shlex.quote(f'{pure.parent}/__pycache__/{pure.stem}')}.*.pyc", cwd="/")
        return await run_suite(fork, baseline.test_paths, cwd=baseline.testbed, timeout_s=timeout_s)
    finally:
        await _stop(fork)


async def _stop(fork: LocalSandbox) -> None:
    """Stop ``fork`` to the end even if the caller is cancelled meanwhile (then re-raise)."""
    stopping = asyncio.ensure_future(fork.stop())
    try:
        await asyncio.shield(stopping)
    except asyncio.CancelledError:
        await stopping
        raise


async def try_candidate(
    baseline: Baseline,
    candidate: Candidate,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    runs: int = 2,
    bounds: Bounds | None = None,
) -> Trial:
    """Run ``candidate`` in ``runs`` fresh forks (later runs only if the first would keep it)."""
    if runs < 1:
        raise ValueError(f"runs must be at least 1, not {runs}")
    path, strategy, started = _checked_path(candidate.path), strategy_of(candidate), time.monotonic()
    if touches_tests_only(baseline, path):
        return Trial(candidate.key, path, strategy, Reason.TEST_ONLY)
    passed, bounds = baseline.passed, bounds or Bounds()
    first: frozenset[str] | None = None
    unbroken = passed
    for number in range(1, runs + 1):
        run = await _run_in_fork(baseline, path, candidate.after, timeout_s)
        elapsed = time.monotonic() - started
        if run.timed_out:
            detail = f"run {number} did not finish within {timeout_s:g}s"
            return Trial(
                candidate.key, path, strategy, Reason.TIMEOUT, runs=number, seconds=elapsed, detail=detail
            )
        reason, failing = judge(passed, run.statuses, run.exit_code, bounds)
        unbroken &= still_passing(passed, run.statuses)
        if first is None:
            first = failing
            if reason is not Reason.KEPT:
                detail = run.tail.strip().splitlines()[-1] if run.tail.strip() else ""
                return Trial(
                    candidate.key,
                    path,
                    strategy,
                    reason,
                    tuple(sorted(failing)),
                    runs=1,
                    seconds=elapsed,
                    detail=detail[:300],
                )
        elif failing != first or reason is not Reason.KEPT:
            differing = tuple(sorted(failing ^ first))
            detail = f"run {number} gave {reason.value} with {len(failing)} failing; run 1 gave {len(first)}"
            return Trial(
                candidate.key, path, strategy, Reason.FLAKY, tuple(sorted(first)), flaky_tests=differing,
                runs=number, seconds=elapsed, detail=detail,
            )  # fmt: skip
    assert first is not None
    shown = {block_name(name) for name in first}
    failures = {name: list(lines) for name, lines in run.failures.items() if name in shown}
    return Trial(
        candidate.key, path, strategy, Reason.KEPT, tuple(sorted(first)), tuple(sorted(unbroken)),
        runs=runs, seconds=time.monotonic() - started, extra={"failures": failures} if failures else {},
    )  # fmt: skip
