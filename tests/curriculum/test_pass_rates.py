"""The pass-rate store: rates over a window of the newest policy versions (unversioned samples
always in it), an EMA of every outcome, bounded memory, and a JSON file that round-trips and
refuses what it cannot read, naming it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ares.curriculum import PassRateStore, PassRateStoreError, TaskPassRate
from ares.errors import AresError


def test_the_window_holds_the_newest_versions_and_every_unversioned_sample() -> None:
    store = PassRateStore(window=4)
    for version in range(10):
        store.record("t", version % 2 == 0, version)  # passes at even versions
    store.record("t", True)
    store.record("t", True)
    # versions 6..9: passes at 6 and 8; plus the two unversioned passes
    assert (store.get("t").passes, store.get("t").samples) == (4, 6)
    assert store.get("t").rate == pytest.approx(4 / 6)
    assert store.newest_version == 9


def test_the_window_is_the_stores_newest_version_across_tasks() -> None:
    store = PassRateStore(window=2)
    store.record("old", True, 0)
    store.record("old", False, 1)
    assert (store.get("old").passes, store.get("old").samples) == (1, 2)
    store.record("other", True, 2)  # version 0 leaves the window for every task
    assert (store.get("old").passes, store.get("old").samples) == (0, 1)
    store.record("other", True, 5)
    assert store.get("old").samples == 0 and store.get("old").rate is None
    store.record("old", True, 1)  # older than the window: the EMA moves, no rate counts it
    assert store.get("old").samples == 0 and store.get("old").ema is not None


def test_unknown_tasks_have_no_samples_and_no_rate() -> None:
    store = PassRateStore()
    assert store.get("nope") == TaskPassRate("nope", 0, 0, None)
    assert store.get("nope").rate is None
    assert "nope" not in store and len(store) == 0 and store.rates() == {}
    assert store.newest_version is None


def test_the_ema_follows_every_outcome_in_order() -> None:
    store = PassRateStore(window=1, ema_alpha=0.25)
    outcomes = [True, False, False, True, True]
    for version, outcome in enumerate(outcomes):
        store.record("t", outcome, version)
    # by hand: 1, then 0.75*1 + 0 = 0.75, 0.5625, 0.5625*0.75 + 0.25 = 0.671875, 0.75390625
    assert store.get("t").ema == pytest.approx(0.75390625)
    assert (store.get("t").passes, store.get("t").samples) == (1, 1)  # only version 4


def test_memory_stays_bounded_as_versions_go_by() -> None:
    store = PassRateStore(window=3)
    store.record("t", False)
    for version in range(1000):
        store.record("t", version % 3 == 0, version)
        store.record("u", True, version)
    assert len(store._tasks["t"].counts) <= store.window + 1
    assert len(store._tasks["u"].counts) <= store.window
    assert store.get("t").samples == 4  # 997..999 and the unversioned one


def test_rates_len_and_contains() -> None:
    store = PassRateStore()
    store.record("a", True, 0)
    store.record("b", False)
    assert len(store) == 2 and "a" in store and "b" in store and "c" not in store
    assert store.rates() == {"a": TaskPassRate("a", 1, 1, 1.0), "b": TaskPassRate("b", 0, 1, 0.0)}


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"window": 0}, "window"), ({"ema_alpha": 0.0}, "ema_alpha"), ({"ema_alpha": 1.5}, "ema_alpha")],
)
def test_bad_settings_are_refused(kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        PassRateStore(**kwargs)  # type: ignore[arg-type]


def test_a_shaped_reward_or_a_bad_version_is_refused() -> None:
    store = PassRateStore()
    with pytest.raises(TypeError, match="pass/fail"):
        store.record("t", 0.7)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="version"):
        store.record("t", True, "3")  # type: ignore[arg-type]
    assert "t" not in store


def _sample_store() -> PassRateStore:
    store = PassRateStore(window=3, ema_alpha=0.5)
    for version in range(5):
        store.record("a", version != 2, version)
        store.record("b/with:odd chars", False, version)
    store.record("a", True)
    store.record("c", False)
    return store


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    store = _sample_store()
    path = tmp_path / "runs" / "pass_rates.json"
    store.save(path)
    loaded = PassRateStore.load(path)
    assert loaded.to_dict() == store.to_dict()
    assert loaded.rates() == store.rates()
    assert (loaded.window, loaded.ema_alpha, loaded.newest_version) == (3, 0.5, 4)
    data = json.loads(path.read_text())
    assert data["format"] == 1
    assert data["tasks"]["a"]["counts"] == {"unversioned": [1, 1], "2": [0, 1], "3": [1, 1], "4": [1, 1]}
    assert [p.name for p in path.parent.iterdir()] == ["pass_rates.json"]  # no temporary file left
    loaded.record("a", False, 5)  # a loaded store goes on
    assert loaded.get("a").samples == 4


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("{not json", "cannot read"),
        ("[1, 2]", "JSON object"),
        ('{"format": 2, "window": 4}', "format 1"),
        ('{"format": 1, "window": 4, "ema_alpha": 0.2, "newest_version": null}', "missing key 'tasks'"),
        (
            '{"format": 1, "window": 4, "ema_alpha": 0.2, "newest_version": 1, '
            '"tasks": {"a": {"counts": {"1": [3, 2]}, "ema": 0.5, "seen": 2}}}',
            "passes must be within",
        ),
        (
            '{"format": 1, "window": 4, "ema_alpha": 0.2, "newest_version": 1, '
            '"tasks": {"a": {"counts": {"v1": [1, 2]}, "ema": 0.5, "seen": 2}}}',
            "v1",
        ),
        (
            '{"format": 1, "window": 0, "ema_alpha": 0.2, "newest_version": null, "tasks": {}}',
            "window",
        ),
    ],
)
def test_an_unreadable_store_names_the_path_and_the_fault(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "pass_rates.json"
    path.write_text(text)
    with pytest.raises(PassRateStoreError, match=match) as caught:
        PassRateStore.load(path)
    assert str(path) in str(caught.value)
    assert isinstance(caught.value, AresError)


def test_a_missing_file_is_a_store_error(tmp_path: Path) -> None:
    with pytest.raises(PassRateStoreError, match=r"missing\.json"):
        PassRateStore.load(tmp_path / "missing.json")


def test_merge_sums_counts_and_weighs_emas() -> None:
    first, second = PassRateStore(window=4), PassRateStore(window=4)
    first.record("a", True, 1)
    first.record("a", True)
    second.record("a", False, 1)
    second.record("a", False, 2)
    second.record("b", True)
    first.merge(second)
    assert (first.get("a").passes, first.get("a").samples) == (2, 4)
    assert first.get("a").ema == pytest.approx((1.0 * 2 + 0.0 * 2) / 4)
    assert first.get("b") == TaskPassRate("b", 1, 1, 1.0)
    assert first.newest_version == 2
    third = PassRateStore(window=4)
    third.record("a", True, 9)  # moves the window past every version merged so far
    first.merge(third)
    assert (first.get("a").passes, first.get("a").samples) == (2, 2)  # the unversioned pass and v9
