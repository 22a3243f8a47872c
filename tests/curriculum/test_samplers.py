"""The samplers against their definitions: many draws on a fixed store land within four standard
errors of the exact probabilities; the same seed gives the same draws; the checks and the flag
parser refuse what they should, saying what is valid."""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Sequence

import pytest

from ares.curriculum import (
    SAMPLERS,
    FromCallable,
    Informative,
    InOrder,
    NothingToSampleError,
    PassRateStore,
    Pools,
    Sampler,
    SkipSolved,
    Uniform,
    parse_sampler,
)
from ares.errors import AresError

DRAWS = 20_000
#: Passes of four samples per task ("e" has none): rates 0, 1/4, 1/2, 1, unknown, 3/4.
PASSES = {"a": 0, "b": 1, "c": 2, "d": 4, "f": 3}
TASKS = ("a", "b", "c", "d", "e", "f")


def _store(passes: dict[str, int] = PASSES, samples: int = 4) -> PassRateStore:
    store = PassRateStore(window=2)
    for task_id, n in passes.items():
        for i in range(samples):
            store.record(task_id, i < n, version=7)
    return store


def _draws(
    sampler: Sampler, seed: int, store: PassRateStore, tasks: Sequence[str] = TASKS, n: int = DRAWS
) -> list[int]:
    rng = random.Random(seed)
    return [sampler.choose(draw, rng, tasks, store) for draw in range(n)]


def _assert_distribution(draws: list[int], expected: dict[str, float], tasks: Sequence[str] = TASKS) -> None:
    """Each task's frequency within 4 standard errors of its probability (exactly 0 where that is 0)."""
    total = sum(expected.values())
    found = Counter(tasks[index] for index in draws)
    for task_id in tasks:
        p = expected.get(task_id, 0.0) / total
        frequency = found[task_id] / len(draws)
        bound = 4 * math.sqrt(p * (1 - p) / len(draws))
        assert abs(frequency - p) <= bound, (task_id, frequency, p)


def test_uniform_draws_every_task_alike() -> None:
    _assert_distribution(_draws(Uniform(), 1, _store()), dict.fromkeys(TASKS, 1.0))


def test_in_order_cycles_through_the_list_without_randomness() -> None:
    rng = random.Random(0)
    state = rng.getstate()
    assert [InOrder().choose(d, rng, TASKS, _store()) for d in range(14)] == [*range(6), *range(6), 0, 1]
    assert rng.getstate() == state


def test_informative_draws_in_proportion_to_p_times_1_minus_p() -> None:
    weights = {"b": 0.1875, "c": 0.25, "e": 0.25, "f": 0.1875}  # a and d: always fail, always pass
    _assert_distribution(_draws(Informative(), 2, _store()), weights)


def test_informative_prior_and_floor() -> None:
    sampler = Informative(prior=0.1, floor=0.05)
    weights = {task: p * (1 - p) + 0.05 for task, p in zip(TASKS, (0, 0.25, 0.5, 1, 0.1, 0.75), strict=True)}
    _assert_distribution(_draws(sampler, 3, _store()), weights)


def test_informative_with_every_weight_zero_is_uniform() -> None:
    store = _store({"a": 0, "b": 4})
    _assert_distribution(_draws(Informative(), 4, store, ("a", "b")), {"a": 1.0, "b": 1.0}, ("a", "b"))


def test_pools_draw_their_mix_then_uniformly_within() -> None:
    # easy: d (rate 1); hard: a (rate 0); normal: b, c, f and e (no samples)
    expected = {"d": 0.1, "a": 0.1, **dict.fromkeys("bcef", 0.8 / 4)}
    _assert_distribution(_draws(Pools(), 5, _store()), expected)


def test_pools_renormalize_the_mix_over_the_pools_that_hold_tasks() -> None:
    tasks = ("b", "c", "d")  # no hard task
    expected = {"d": 0.1 / 0.9, "b": 0.4 / 0.9, "c": 0.4 / 0.9}
    _assert_distribution(_draws(Pools(), 6, _store(), tasks), expected, tasks)


def test_pools_count_tasks_with_too_few_samples_as_normal() -> None:
    sampler = Pools(easy=0.9, hard=0.1, mix=(0.5, 0.0, 0.5), min_samples=5)  # 4 samples each
    _assert_distribution(_draws(sampler, 7, _store()), dict.fromkeys(TASKS, 1.0))  # mix 0 only: uniform
    sampler = Pools(easy=0.9, hard=0.1, mix=(0.5, 0.0, 0.5), min_samples=4)
    _assert_distribution(_draws(sampler, 7, _store()), {"a": 0.5, "d": 0.5})


def test_skip_solved_never_draws_a_solved_task_and_delegates() -> None:
    store = _store({**PASSES, "f": 4})  # d and f solved
    store.record("e", True, 7)  # one sample: too few to be solved
    _assert_distribution(_draws(SkipSolved(), 8, store), dict.fromkeys("abce", 1.0))
    in_order = SkipSolved(inner=InOrder())
    assert [in_order.choose(d, random.Random(0), TASKS, store) for d in range(6)] == [0, 1, 2, 4, 0, 1]
    informative = SkipSolved(tau=0.75, inner=Informative())  # f (3 of 4) solved too
    _assert_distribution(_draws(informative, 9, _store()), {"b": 0.1875, "c": 0.25, "e": 0.25})


def test_skip_solved_with_everything_solved_says_so() -> None:
    store = _store({"a": 4, "b": 4})
    with pytest.raises(NothingToSampleError, match=r"all 2 tasks are solved \(pass rate >= 0.9 over >= 4"):
        SkipSolved().choose(0, random.Random(0), ("a", "b"), store)
    assert issubclass(NothingToSampleError, AresError)


def test_no_tasks_is_nothing_to_sample() -> None:
    for sampler in (Uniform(), InOrder(), Informative(), Pools(), SkipSolved()):
        with pytest.raises(NothingToSampleError, match="no tasks"):
            sampler.choose(0, random.Random(0), (), PassRateStore())


@pytest.mark.parametrize("sampler", [Uniform(), Informative(floor=0.01), Pools(), SkipSolved()])
def test_the_same_seed_draws_the_same_tasks(sampler: Sampler) -> None:
    store = _store()
    first = _draws(sampler, 11, store, n=200)
    assert _draws(sampler, 11, store, n=200) == first
    assert _draws(sampler, 12, store, n=200) != first


def _last(draw: int, rng: random.Random, task_ids: Sequence[str], store: PassRateStore) -> int:
    return len(task_ids) - 1


def test_from_callable_uses_the_function_and_checks_its_answer() -> None:
    store = _store()
    assert FromCallable(_last).choose(0, random.Random(0), TASKS, store) == 5
    with pytest.raises(ValueError, match=r"sampler .*<lambda> returned index 6, outside 0..5"):
        FromCallable(lambda d, r, t, s: 6).choose(0, random.Random(0), TASKS, store)
    with pytest.raises(TypeError, match=r"_last2 returned '1', not an int"):

        def _last2(draw: int, rng: random.Random, task_ids: Sequence[str], store: PassRateStore) -> int:
            return "1"  # type: ignore[return-value]

        FromCallable(_last2).choose(0, random.Random(0), TASKS, store)
    with pytest.raises(TypeError, match="True"):
        FromCallable(lambda d, r, t, s: True).choose(0, random.Random(0), TASKS, store)


@pytest.mark.parametrize(
    ("spec", "sampler"),
    [
        ("uniform", Uniform()),
        (" in-order ", InOrder()),
        ("informative", Informative()),
        ("informative:floor=0.01", Informative(floor=0.01)),
        ("informative:prior=0.3, floor=0", Informative(prior=0.3, floor=0.0)),
        ("pools:easy=0.9,hard=0.1", Pools(easy=0.9, hard=0.1)),
        ("pools:mix=0.2/0.6/0.2,n=3", Pools(mix=(0.2, 0.6, 0.2), min_samples=3)),
        ("skip-solved:tau=0.95,n=8", SkipSolved(tau=0.95, min_samples=8)),
        ("skip-solved:min_samples=2", SkipSolved(min_samples=2)),
        ("pools:", Pools()),
    ],
)
def test_parse_sampler_reads_each_name_and_its_options(spec: str, sampler: Sampler) -> None:
    assert parse_sampler(spec) == sampler


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("random", "unknown sampler 'random'.*valid: uniform, in-order, informative, pools, skip-solved"),
        ("pools:size=3", "bad option 'size=3'.*valid keys: easy, hard, mix, n, min_samples"),
        ("pools:easy", "bad option 'easy'"),
        ("uniform:seed=1", "valid keys: none"),
        ("pools:easy=lots", "easy='lots' is not a valid value"),
        ("skip-solved:n=two", "n='two' is not a valid value"),
        ("pools:easy=0.1", "hard < easy"),
        ("pools:mix=0.5/0.5", "mix is 3 shares"),
        ("skip-solved:n=2,min_samples=3", "min_samples given twice"),
        ("skip-solved:tau=0", "tau must be in"),
        ("informative:floor=-1", "floor must be >= 0"),
    ],
)
def test_parse_sampler_refuses_bad_specs(spec: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        parse_sampler(spec)


def test_samplers_lists_the_names() -> None:
    assert SAMPLERS == ("uniform", "in-order", "informative", "pools", "skip-solved")
    assert all(parse_sampler(name) is not None for name in SAMPLERS)


@pytest.mark.parametrize(
    "make",
    [
        lambda: Pools(hard=0.8, easy=0.8),
        lambda: Pools(mix=(0.0, 0.0, 0.0)),
        lambda: Pools(mix=(0.5, -0.1, 0.6)),
        lambda: Informative(prior=1.5),
        lambda: SkipSolved(min_samples=0),
    ],
)
def test_bad_parameters_are_refused(make: object) -> None:
    with pytest.raises(ValueError):
        make()  # type: ignore[operator]
