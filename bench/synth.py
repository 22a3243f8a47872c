"""Validating candidate bugs at fork speed vs. a fresh sandbox or a fresh install per candidate.

The toolz fixture project (tests/fixtures/swe/images, /testbed at pytoolz__toolz-90001's base) and
simple operator flips in ``toolz/itertoolz.py`` as candidates (one suite run each, ``runs=1``):

- baseline: one suite run in a sandbox of the installed image, then the snapshot.
- fork: ``try_candidate`` per candidate (a fork of the snapshot, the file written, the suite run).
- fresh_sandbox: a new sandbox of the installed image per candidate (no snapshot, nothing installed).
- fresh_install: a new sandbox of the bare base image (``ares/host-python``, network on for PyPI)
  per candidate: the repository uploaded, ``pip install pytest`` and ``pip install -e``, the suite.
- validate_all: every candidate through ``validate_all`` with ``--workers`` forks at once
  (candidates per minute, the issue's figure).

    .venv/bin/python bench/synth.py [--candidates 10] [--tests toolz/tests] [--workers N]
        [--install-samples 3]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import ROOT, machine_info, summarize_ms
from ares.factory.baseline import Baseline, take_baseline
from ares.factory.suite import run_suite
from ares.factory.trial import try_candidate
from ares.factory.validate import validate_all
from ares.sandbox.base import ImageSpec, SandboxSpec
from ares.sandbox.local import LocalSandbox
from ares.sandbox.local.images import local_builder

IMAGES = ROOT / "tests" / "fixtures" / "swe" / "images"
IMAGE = "ares-swe/toolz-90001:bench"
BASE_IMAGE = "ares/host-python"
PATH = "toolz/itertoolz.py"
CLEAN = "rm -rf /testbed/*.egg-info; find /testbed -name __pycache__ -prune -exec rm -rf {} +"
FLIPS = (
    (" == ", " != "),
    (" < ", " >= "),
    (" > ", " <= "),
    (" + 1", " - 1"),
    (" - 1", " + 1"),
    (" and ", " or "),
)


@dataclass(frozen=True)
class Flip:
    path: str
    after: str
    key: str
    strategy: str = "flip"


def flips(source: str, limit: int) -> list[Flip]:
    """One operator flipped per candidate, in file order: deterministic, no mutation library needed."""
    found: list[Flip] = []
    lines = source.splitlines(keepends=True)
    for number, line in enumerate(lines):
        for old, new in FLIPS:
            if old in line and not line.lstrip().startswith(("#", ">>>")):
                after = "".join([*lines[:number], line.replace(old, new, 1), *lines[number + 1 :]])
                found.append(Flip(PATH, after, hashlib.sha256(after.encode()).hexdigest()[:16]))
                if len(found) == limit:
                    return found
    return found


async def timed(make: Callable[[], Awaitable[object]]) -> float:
    started = time.perf_counter()
    await make()
    return time.perf_counter() - started


async def fresh_sandbox(baseline: Baseline, candidate: Flip) -> None:
    sandbox = LocalSandbox(SandboxSpec(image=ImageSpec(name=IMAGE), network=False, workdir="/testbed"))
    try:
        await sandbox.start()
        await sandbox.upload({candidate.path: candidate.after}, "/testbed")
        await run_suite(sandbox, baseline.test_paths, cwd="/testbed", timeout_s=600)
    finally:
        await sandbox.stop()


async def fresh_install(baseline: Baseline, repo: Path, candidate: Flip) -> None:
    sandbox = LocalSandbox(SandboxSpec(image=ImageSpec(name=BASE_IMAGE), network=True, workdir="/"))
    try:
        await sandbox.start()
        await sandbox.upload(repo, "/testbed")
        await sandbox.upload({candidate.path: candidate.after}, "/testbed")
        install = "python -m pip install -q pytest && python -m pip install -q -e /testbed"
        result = await sandbox.exec(install, timeout_s=600)
        if not result.ok:
            raise RuntimeError(f"install failed: {result.stderr[-500:]}")
        await run_suite(sandbox, baseline.test_paths, cwd="/testbed", timeout_s=600)
    finally:
        await sandbox.stop()


async def pristine_repo(dest: Path) -> Path:
    """The installed image's /testbed without build leftovers, as the tree a fresh install starts from."""
    sandbox = LocalSandbox(SandboxSpec(image=ImageSpec(name=IMAGE), network=False, workdir="/testbed"))
    try:
        await sandbox.start()
        await sandbox.exec(CLEAN)
        await sandbox.download("/testbed", dest)
    finally:
        await sandbox.stop()
    return dest


async def main(args: argparse.Namespace) -> dict[str, Any]:
    build_s = await timed(lambda: build_images())
    baseline = await take_baseline(IMAGE, tuple(args.tests.split(",")), timeout_s=600)
    baseline_s = baseline.seconds
    try:
        source_box = baseline.fork()
        await source_box.start()
        try:
            source = (await source_box.read_file(f"/testbed/{PATH}")).decode()
        finally:
            await source_box.stop()
        candidates = flips(source, args.candidates)
        fork_s = [
            await timed(lambda c=c: try_candidate(baseline, c, runs=1, timeout_s=120)) for c in candidates
        ]
        sandbox_s = [await timed(lambda c=c: fresh_sandbox(baseline, c)) for c in candidates]
        with tempfile.TemporaryDirectory(prefix="ares-bench-synth-") as tmp:
            repo = await pristine_repo(Path(tmp) / "testbed")
            sample = candidates[: args.install_samples]
            install_s = [await timed(lambda c=c: fresh_install(baseline, repo, c)) for c in sample]
            results = Path(tmp) / "trials.jsonl"
            summary = await validate_all(
                baseline, candidates, results=results, workers=args.workers, timeout_s=120, runs=1
            )
    finally:
        await baseline.discard()
    fork_p50, install_p50 = statistics.median(fork_s), statistics.median(install_s)
    return {
        "machine": machine_info(),
        "tests": args.tests,
        "baseline_tests": len(baseline.statuses),
        "baseline_passed": len(baseline.passed),
        "image_build_s": round(build_s, 3),
        "baseline_suite_s": round(baseline_s, 3),
        "fork": summarize_ms(fork_s),
        "fresh_sandbox": summarize_ms(sandbox_s),
        "fresh_install": summarize_ms(install_s),
        "speedup_fork_vs_fresh_install_p50": round(install_p50 / fork_p50, 2),
        "speedup_fork_vs_fresh_sandbox_p50": round(statistics.median(sandbox_s) / fork_p50, 2),
        "validate_all": {
            "workers": args.workers,
            "candidates": len(candidates),
            "seconds": round(summary.seconds, 3),
            "per_minute": round(60 * len(candidates) / summary.seconds, 1),
            "by_reason": summary.by_reason,
        },
        "fresh_install_per_minute_serial": round(60 / install_p50, 1),
        "fork_per_minute_serial": round(60 / fork_p50, 1),
    }


async def build_images() -> None:
    builder = local_builder()
    await builder.build(IMAGES / "toolz", tags=("ares-swe/toolz:1.2.0",))
    await builder.build(IMAGES / "instances" / "pytoolz__toolz-90001", tags=(IMAGE,))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=10)
    parser.add_argument("--tests", default="toolz/tests", help="comma-separated test paths in /testbed")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--install-samples", type=int, default=3, help="fresh installs to time (slow)")
    os.environ.setdefault("ARES_IMAGE_FALLBACK", "offline")
    print(json.dumps(asyncio.run(main(parser.parse_args())), indent=2))
