"""Validate many candidate bugs against one baseline: ``workers`` forks at once, resumable.

Every finished trial is appended as one JSON line to the results file, keyed by the candidate's diff
hash; a later call skips the keys already there, so an interrupted run picks up where it stopped.
A candidate whose key was already seen in this call is a duplicate diff and is not run again (nor
written: the first one's line stands for the diff).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ares.factory.baseline import Baseline
from ares.factory.trial import DEFAULT_TIMEOUT_S, Candidate, Trial, strategy_of, try_candidate
from ares.factory.verdict import Bounds, Reason


@dataclass(frozen=True, slots=True)
class Summary:
    """Counts over this call's candidates: their trials (run now or read back) and duplicates.

    ``by_strategy`` maps strategy -> reason -> count; ``yield_by_strategy`` is kept / tried (tried
    counts duplicates too: they cost nothing but are not new tasks)."""

    trials: int
    kept: int
    ran: int
    resumed: int
    seconds: float
    by_reason: dict[str, int] = field(default_factory=dict)
    by_strategy: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def yield_by_strategy(self) -> dict[str, float]:
        return {
            name: round(counts.get(Reason.KEPT.value, 0) / max(1, sum(counts.values())), 4)
            for name, counts in self.by_strategy.items()
        }

    def to_json(self) -> dict[str, object]:
        return {
            "trials": self.trials, "kept": self.kept, "ran": self.ran, "resumed": self.resumed,
            "seconds": round(self.seconds, 3), "by_reason": self.by_reason, "by_strategy": self.by_strategy,
            "yield_by_strategy": self.yield_by_strategy,
        }  # fmt: skip


def read_results(results: Path) -> dict[str, Trial]:
    """The trials already in ``results`` by key (a torn last line, from a kill mid-write, is ignored)."""
    if not results.exists():
        return {}
    done: dict[str, Trial] = {}
    for number, line in enumerate(results.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            trial = Trial.from_json(json.loads(line))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{results}:{number}: not a trial line ({exc})") from exc
        done[trial.key] = trial
    return done


def _append(results: Path, trial: Trial) -> None:
    with results.open("a") as f:
        f.write(json.dumps(trial.to_json(), sort_keys=True) + "\n")
        f.flush()


def _summarize(trials: Iterable[Trial], ran: int, resumed: int, seconds: float) -> Summary:
    by_reason: Counter[str] = Counter()
    by_strategy: dict[str, Counter[str]] = {}
    for trial in trials:
        by_reason[trial.reason.value] += 1
        by_strategy.setdefault(trial.strategy, Counter())[trial.reason.value] += 1
    return Summary(
        trials=sum(by_reason.values()), kept=by_reason[Reason.KEPT.value], ran=ran, resumed=resumed,
        seconds=seconds, by_reason=dict(sorted(by_reason.items())),
        by_strategy={name: dict(sorted(c.items())) for name, c in sorted(by_strategy.items())},
    )  # fmt: skip


async def validate_all(
    baseline: Baseline,
    candidates: Iterable[Candidate],
    *,
    results: Path,
    workers: int | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    runs: int = 2,
    bounds: Bounds | None = None,
) -> Summary:
    """Try every new candidate in forks of ``baseline``, ``workers`` (default: CPU count) at a time.

    ``candidates`` is consumed lazily (in a thread: generating mutations parses source), so a long
    generator never sits wholly in memory."""
    workers = workers or os.cpu_count() or 1
    if workers < 1:
        raise ValueError(f"workers must be at least 1, not {workers}")
    started = time.monotonic()
    done = await asyncio.to_thread(read_results, results)
    await asyncio.to_thread(results.parent.mkdir, parents=True, exist_ok=True)
    seen: set[str] = set()
    duplicates: list[Trial] = []
    fresh: list[Trial] = []
    resumed = 0
    source: Iterator[Candidate] = iter(candidates)
    pulling, writing = asyncio.Lock(), asyncio.Lock()

    async def next_new() -> Candidate | None:
        nonlocal resumed
        async with pulling:
            while (candidate := await asyncio.to_thread(next, source, None)) is not None:
                if candidate.key in seen:
                    strategy = strategy_of(candidate)
                    duplicates.append(Trial(candidate.key, candidate.path, strategy, Reason.DUPLICATE_DIFF))
                    continue
                seen.add(candidate.key)
                if candidate.key in done:
                    resumed += 1
                    continue
                return candidate
            return None

    async def worker() -> None:
        while (candidate := await next_new()) is not None:
            trial = await try_candidate(baseline, candidate, timeout_s=timeout_s, runs=runs, bounds=bounds)
            async with writing:
                await asyncio.to_thread(_append, results, trial)
                fresh.append(trial)

    async with asyncio.TaskGroup() as group:
        for _ in range(workers):
            group.create_task(worker())
    # Trials of an earlier, larger pool stay in the file (a later run may want them) but are not
    # this pool's yield.
    every = [*(trial for key, trial in done.items() if key in seen), *fresh, *duplicates]
    return _summarize(every, len(fresh), resumed, time.monotonic() - started)
