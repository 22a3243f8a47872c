"""Task samplers: which task a run's next rollout plays, from the tasks' pass rates.

A ``Sampler`` answers one question: for the ``draw``-th choice of a run, which index of
``task_ids``. It holds no randomness of its own: all of it comes from the ``rng`` the runner seeds
once per run, so a run with the same seed, task list and store state draws the same tasks, and a
sampler is plain data that pickles to a worker.

The samplers: ``Uniform``; ``InOrder`` (a cycle through the list); ``Informative`` (weight
``p(1 - p)``, the variance of a task's outcome, which is where a group of rollouts has an
advantage to learn from); ``Pools`` (easy, normal and hard tasks in a fixed mix); ``SkipSolved``
(another sampler over the tasks not yet solved); ``FromCallable`` (a user's function, checked).
``parse_sampler`` reads one from a command-line flag.
"""

from __future__ import annotations

import bisect
import itertools
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ares.curriculum.pass_rates import PassRateStore
from ares.errors import AresError


class NothingToSampleError(AresError):
    """No task is left to sample from (an empty task list, or every task solved)."""


class Sampler(Protocol):
    """Chooses the task of each draw of a run, with all its randomness from ``rng``."""

    def choose(self, draw: int, rng: random.Random, task_ids: Sequence[str], store: PassRateStore) -> int:
        """The index into ``task_ids`` of the task for the ``draw``-th choice (from 0) of a run."""
        ...


@dataclass(frozen=True, slots=True)
class Uniform:
    """Every task equally likely, whatever its pass rate."""

    def choose(self, draw: int, rng: random.Random, task_ids: Sequence[str], store: PassRateStore) -> int:
        return rng.randrange(_size(task_ids))


@dataclass(frozen=True, slots=True)
class InOrder:
    """The tasks in list order, round and round (no randomness, no rates): draw ``d`` plays
    ``task_ids[d % len(task_ids)]``."""

    def choose(self, draw: int, rng: random.Random, task_ids: Sequence[str], store: PassRateStore) -> int:
        return draw % _size(task_ids)


@dataclass(frozen=True, slots=True)
class Informative:
    """Tasks in proportion to ``p(1 - p) + floor``, ``p`` the windowed pass rate (``prior`` for a
    task with no samples): a group on a task that always passes or always fails has no advantage.
    ``floor`` keeps every task in play (so a rate that moved can be seen); with every weight 0,
    uniform."""

    prior: float = 0.5
    floor: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.prior <= 1.0:
            raise ValueError(f"informative: prior must be in [0, 1], got {self.prior}")
        if not self.floor >= 0.0:
            raise ValueError(f"informative: floor must be >= 0, got {self.floor}")

    def weight(self, rate: float | None) -> float:
        p = self.prior if rate is None else rate
        return p * (1.0 - p) + self.floor

    def choose(self, draw: int, rng: random.Random, task_ids: Sequence[str], store: PassRateStore) -> int:
        _size(task_ids)
        return _weighted_choice(rng, [self.weight(store.get(task_id).rate) for task_id in task_ids])


@dataclass(frozen=True, slots=True)
class Pools:
    """Easy (rate >= ``easy``), hard (rate <= ``hard``) and normal tasks, drawn in the proportions
    of ``mix`` (easy, normal, hard); a task with fewer than ``min_samples`` samples is normal.

    A pool is picked in proportion to ``mix`` among the pools that hold tasks (renormalized), then a
    task uniformly within it. Should only pools of mix 0 hold tasks, every task is equally likely.
    """

    easy: float = 0.8
    hard: float = 0.2
    mix: tuple[float, float, float] = (0.1, 0.8, 0.1)
    min_samples: int = 1

    def __post_init__(self) -> None:
        if not 0.0 <= self.hard < self.easy <= 1.0:
            raise ValueError(f"pools: need 0 <= hard < easy <= 1, got hard={self.hard}, easy={self.easy}")
        if len(self.mix) != 3 or not all(share >= 0.0 for share in self.mix) or not sum(self.mix) > 0.0:
            raise ValueError(f"pools: mix is 3 shares (easy, normal, hard) >= 0, not all 0; got {self.mix}")
        if self.min_samples < 0:
            raise ValueError(f"pools: min_samples must be >= 0, got {self.min_samples}")

    def pool(self, rate: float | None, samples: int) -> int:
        """0 easy, 1 normal, 2 hard."""
        if rate is None or samples < self.min_samples:
            return 1
        return 0 if rate >= self.easy else 2 if rate <= self.hard else 1

    def choose(self, draw: int, rng: random.Random, task_ids: Sequence[str], store: PassRateStore) -> int:
        pools: tuple[list[int], ...] = ([], [], [])
        for index in range(_size(task_ids)):
            rate = store.get(task_ids[index])
            pools[self.pool(rate.rate, rate.samples)].append(index)
        shares = [share if members else 0.0 for share, members in zip(self.mix, pools, strict=True)]
        if not sum(shares) > 0.0:
            return rng.randrange(len(task_ids))
        members = pools[_weighted_choice(rng, shares)]
        return members[rng.randrange(len(members))]


@dataclass(frozen=True, slots=True)
class SkipSolved:
    """``inner`` over the tasks not solved: a task is solved at a rate >= ``tau`` over at least
    ``min_samples`` samples. ``NothingToSampleError`` once every task is."""

    tau: float = 0.9
    min_samples: int = 4
    inner: Sampler = field(default_factory=Uniform)

    def __post_init__(self) -> None:
        if not 0.0 < self.tau <= 1.0:
            raise ValueError(f"skip-solved: tau must be in (0, 1], got {self.tau}")
        if self.min_samples < 1:
            raise ValueError(f"skip-solved: min_samples must be >= 1, got {self.min_samples}")

    def solved(self, task_id: str, store: PassRateStore) -> bool:
        rate = store.get(task_id)
        return rate.samples >= self.min_samples and rate.rate is not None and rate.rate >= self.tau

    def choose(self, draw: int, rng: random.Random, task_ids: Sequence[str], store: PassRateStore) -> int:
        left = [index for index in range(_size(task_ids)) if not self.solved(task_ids[index], store)]
        if not left:
            raise NothingToSampleError(
                f"all {len(task_ids)} tasks are solved (pass rate >= {self.tau} over >= "
                f"{self.min_samples} samples): nothing left to sample; raise tau or add tasks"
            )
        return left[self.inner.choose(draw, rng, [task_ids[index] for index in left], store)]


@dataclass(frozen=True, slots=True)
class FromCallable:
    """A user's function with ``Sampler.choose``'s signature as a sampler; its answer is checked (an
    int index into ``task_ids``) so that a bad one fails at the draw, naming the function."""

    fn: Callable[[int, random.Random, Sequence[str], PassRateStore], int]

    def choose(self, draw: int, rng: random.Random, task_ids: Sequence[str], store: PassRateStore) -> int:
        size = _size(task_ids)
        index = self.fn(draw, rng, task_ids, store)
        name = getattr(self.fn, "__qualname__", None) or repr(self.fn)
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(f"sampler {name} returned {index!r}, not an int index into the task list")
        if not 0 <= index < size:
            raise ValueError(f"sampler {name} returned index {index}, outside 0..{size - 1}")
        return index


def _weighted_choice(rng: random.Random, weights: Sequence[float]) -> int:
    """An index drawn with probability exactly proportional to ``weights`` (>= 0), from one
    ``rng.random()``; uniform when they are all 0. A weight of 0 is never drawn otherwise."""
    cumulative = list(itertools.accumulate(weights))
    total = cumulative[-1]
    if not total > 0.0:
        return rng.randrange(len(weights))
    # random() < 1, so the point falls below the total and bisect lands on a weight above 0.
    return bisect.bisect_right(cumulative, rng.random() * total, 0, len(cumulative) - 1)


def _size(task_ids: Sequence[str]) -> int:
    if not task_ids:
        raise NothingToSampleError("there are no tasks to sample from")
    return len(task_ids)


#: Per sampler name: its class and its options on the command line (key -> field, type).
_OPTIONS: dict[str, tuple[Callable[..., Sampler], dict[str, tuple[str, Callable[[str], Any]]]]] = {
    "uniform": (Uniform, {}),
    "in-order": (InOrder, {}),
    "informative": (Informative, {"prior": ("prior", float), "floor": ("floor", float)}),
    "pools": (
        Pools,
        {
            "easy": ("easy", float),
            "hard": ("hard", float),
            "mix": ("mix", lambda text: tuple(float(share) for share in text.split("/"))),
            "n": ("min_samples", int),
            "min_samples": ("min_samples", int),
        },
    ),
    "skip-solved": (
        SkipSolved,
        {"tau": ("tau", float), "n": ("min_samples", int), "min_samples": ("min_samples", int)},
    ),
}
#: The sampler names ``parse_sampler`` reads.
SAMPLERS: tuple[str, ...] = tuple(_OPTIONS)


def parse_sampler(spec: str) -> Sampler:
    """A sampler from a flag: a name of ``SAMPLERS``, optionally ``:key=value,key=value``, e.g.
    ``pools:easy=0.9,hard=0.1``, ``pools:mix=0.2/0.6/0.2``, ``skip-solved:tau=0.95,n=8``,
    ``informative:floor=0.01``. ``ValueError`` naming the valid names or keys otherwise."""
    name, _, options = spec.strip().partition(":")
    name = name.strip()
    if name not in _OPTIONS:
        raise ValueError(f"unknown sampler {name!r} in {spec!r}; valid: {', '.join(SAMPLERS)}")
    make, keys = _OPTIONS[name]
    kwargs: dict[str, Any] = {}
    for option in filter(None, (part.strip() for part in options.split(","))):
        key, eq, text = (part.strip() for part in option.partition("="))
        if key not in keys or not eq:
            valid = ", ".join(keys) or "none"
            raise ValueError(f"sampler {name}: bad option {option!r} in {spec!r}; valid keys: {valid}")
        field_name, parse = keys[key]
        if field_name in kwargs:
            raise ValueError(f"sampler {name}: {field_name} given twice in {spec!r}")
        try:
            kwargs[field_name] = parse(text)
        except ValueError:
            raise ValueError(f"sampler {name}: {key}={text!r} is not a valid value in {spec!r}") from None
    return make(**kwargs)
