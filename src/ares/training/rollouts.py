"""One batch of rollouts for a trainer: run episodes in groups, get their exact token sequences back.

``collect_rollouts`` is ``run_episodes`` with an in-memory collector: the trainer gets each
episode's result (status, reward, error) and its ``TokenSequence``s built from the live responses,
so what it trains on is exactly what the policy saw and said, and status and reward are the
runner's own.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ares.core.environment import Environment
from ares.policies.base import PolicyFactory
from ares.records.collectors import MemoryCollector
from ares.rollout.dynamic import Batch, GroupFilter, informative_batch
from ares.rollout.results import EpisodeResult
from ares.rollout.runner import run_episodes
from ares.rollout.stream import stream_groups
from ares.training.sequences import TokenSequence, token_sequences


@dataclass(frozen=True, slots=True)
class Rollouts:
    """A batch: every episode's result, in episode order, and the sequences of each episode."""

    results: tuple[EpisodeResult, ...]
    sequences: tuple[tuple[TokenSequence, ...], ...]

    def scored(self) -> list[TokenSequence]:
        """The sequences a trainer learns from: with a reward and not masked (``trainable``)."""
        return [s for per_episode in self.sequences for s in per_episode if s.trainable]


async def collect_rollouts(
    make_env: Callable[[], Environment[Any, Any]],
    policy: PolicyFactory,
    *,
    episodes: int,
    group_size: int = 1,
    concurrency: int = 8,
    seed: int = 0,
    **run_options: Any,
) -> Rollouts:
    """Run ``episodes`` episodes (``group_size`` per task, as ``run_episodes``) and build their sequences.

    Raises ``MissingTokensError`` when the policy answered in text only.
    """
    collector = MemoryCollector()
    results = await run_episodes(
        make_env, policy, episodes=episodes, group_size=group_size, concurrency=concurrency, seed=seed,
        collector=collector, trace="off", **run_options,
    )  # fmt: skip
    by_index: dict[int, list[TokenSequence]] = {}
    for episode in collector.take():
        index = episode.metadata.get("episode_index")
        if isinstance(index, int):
            by_index.setdefault(index, []).extend(token_sequences(episode))
    return Rollouts(tuple(results), tuple(tuple(by_index.get(r.index, ())) for r in results))


async def collect_informative(
    make_env: Callable[[], Environment[Any, Any]],
    policy: PolicyFactory,
    *,
    groups: int,
    max_groups: int,
    group_size: int,
    concurrency: int = 8,
    seed: int = 0,
    keep: GroupFilter | None = None,
    **run_options: Any,
) -> tuple[Rollouts, Batch]:
    """Dynamic sampling for a trainer (``ares.rollout.dynamic``): up to ``max_groups`` groups are
    played, streamed as they finish, until ``groups`` of them carry signal; the batch of those (and
    their sequences), with what was dropped and why. ``run_options`` go to ``run_episodes``
    (``group_tasks`` for a curriculum's plan of ``max_groups`` groups)."""
    collector = MemoryCollector()
    stream = stream_groups(
        make_env, policy, episodes=max_groups * group_size, group_size=group_size, concurrency=concurrency,
        seed=seed, collector=collector, trace="off", **run_options,
    )  # fmt: skip
    batch = await informative_batch(stream, groups, keep)
    kept = batch.results
    by_index: dict[int, list[TokenSequence]] = {}
    wanted = {r.index for r in kept}
    for episode in collector.take():
        index = episode.metadata.get("episode_index")
        if isinstance(index, int) and index in wanted:
            by_index.setdefault(index, []).extend(token_sequences(episode))
    return Rollouts(tuple(kept), tuple(tuple(by_index.get(r.index, ())) for r in kept)), batch


def group_advantages(
    sequences: Sequence[TokenSequence], eps: float = 1e-4, *, scale: bool = True
) -> list[float]:
    """GRPO advantages: each reward minus its group's mean, over the group's spread when ``scale``.

    A sequence that is not ``trainable`` (no reward, or masked) gets 0.0 and is left out of its
    group's statistics.
    """
    groups: dict[str | None, list[float]] = {}
    for s in sequences:
        if s.trainable and s.reward is not None:
            groups.setdefault(s.group_id, []).append(s.reward)
    stats = {g: (statistics.fmean(r), statistics.pstdev(r)) for g, r in groups.items()}
    out = []
    for s in sequences:
        if not s.trainable or s.reward is None:
            out.append(0.0)
            continue
        mean, spread = stats[s.group_id]
        out.append((s.reward - mean) / (spread + eps) if scale else s.reward - mean)
    return out
