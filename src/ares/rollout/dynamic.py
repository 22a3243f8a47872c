"""Dynamic sampling: a training batch of groups that carry signal, the rest dropped and counted.

A group whose members all pass or all fail gives group-relative advantages (GRPO, RLOO) nothing to
learn from: every advantage is zero. ``informative_batch`` takes finished groups from a stream
(``stream_groups``, ``RunSpec.stream``) ready-first and keeps those that carry signal until it
holds ``size`` of them; drawing more is bounded by the stream itself (its episodes are the cap).
Leaving early closes the stream, which stops the episodes still running. Why each group was dropped
is counted (``Batch.dropped``), for the run summary and the tracker.

The filter reads the verifier's outcome (``EpisodeResult.passed``, ``group_agreement``), never the
shaped reward; ``min_reward_std`` adds an optional filter on the spread of the rewards themselves,
for tasks whose reward is continuous.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ares.rollout.results import EpisodeResult, group_agreement


@dataclass(frozen=True, slots=True)
class GroupFilter:
    """Which groups a batch keeps: those whose kept members disagree on the outcome and, with
    ``min_reward_std``, whose rewards spread at least that much (population std of the unmasked
    members' rewards, an errored one counting 0)."""

    min_reward_std: float | None = None

    def __post_init__(self) -> None:
        if self.min_reward_std is not None and self.min_reward_std < 0:
            raise ValueError(f"min_reward_std must be >= 0, got {self.min_reward_std}")

    def drop_reason(self, group: Sequence[EpisodeResult]) -> str | None:
        """Why ``group`` carries no signal (``all_passed``, ``all_failed``, ``too_few``,
        ``low_reward_std``), or None to keep it."""
        reason = group_agreement(group)
        if reason is not None or self.min_reward_std is None:
            return reason
        rewards = [r.reward or 0.0 for r in group if not r.masked]
        return "low_reward_std" if statistics.pstdev(rewards) < self.min_reward_std else None


@dataclass(frozen=True, slots=True)
class Batch:
    """The groups kept (each in episode order) out of ``size`` wanted, how many finished groups were
    looked at, and how many were dropped, by reason."""

    groups: tuple[tuple[EpisodeResult, ...], ...]
    size: int
    seen: int
    dropped: Mapping[str, int] = field(default_factory=dict)

    @property
    def results(self) -> list[EpisodeResult]:
        """Every kept episode, group after group."""
        return [result for group in self.groups for result in group]

    @property
    def full(self) -> bool:
        """Whether the batch holds ``size`` groups (else the stream ran out first)."""
        return len(self.groups) >= self.size

    def to_dict(self) -> dict[str, Any]:
        """The counts a tracker logs."""
        return {
            "groups_kept": len(self.groups),
            "groups_seen": self.seen,
            "groups_dropped": sum(self.dropped.values()),
            **{f"groups_dropped_{reason}": n for reason, n in sorted(self.dropped.items())},
        }


async def informative_batch(
    groups: AsyncIterator[list[EpisodeResult]], size: int, keep: GroupFilter | None = None
) -> Batch:
    """Groups from ``groups`` that ``keep`` keeps (default: outcomes that disagree), until there are
    ``size`` or the stream ends; the stream is closed either way (its running episodes stop)."""
    if size < 1:
        raise ValueError(f"a batch needs size >= 1, got {size}")
    chosen = keep or GroupFilter()
    kept: list[tuple[EpisodeResult, ...]] = []
    dropped: Counter[str] = Counter()
    seen = 0
    try:
        async for group in groups:
            seen += 1
            reason = chosen.drop_reason(group)
            if reason is None:
                kept.append(tuple(group))
                if len(kept) == size:
                    break
            else:
                dropped[reason] += 1
    finally:
        closing = getattr(groups, "aclose", None)
        if closing is not None:
            await closing()
    return Batch(tuple(kept), size, seen, dict(dropped))
