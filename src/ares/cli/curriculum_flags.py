"""``ares run --sampler SPEC --pass-rates SOURCE``: the run's curriculum, kept beside its results.

With either flag the run gets a ``Curriculum`` whose store lives at ``OUT/pass_rates.json`` (saved
when the run ends, however it ends) and whose plan, each group's task, at ``OUT/curriculum_plan.json``
(written before the first episode). ``--pass-rates`` seeds a new store from earlier measurements: a
store file, an ``ares tasks validate`` report, or an ``ares run`` directory (any number of them).
``--resume`` loads the run's own store and replays its plan: the groups already played are not
counted twice and the rest play the tasks they were planned with.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from ares.curriculum import InOrder, PassRateStore, parse_sampler, seed_from_run, seed_from_validation
from ares.errors import AresError
from ares.rollout import Curriculum, RunSpec

STORE_NAME = "pass_rates.json"
PLAN_NAME = "curriculum_plan.json"


def with_curriculum(
    spec: RunSpec, sampler: str | None, sources: Sequence[Path], out_dir: Path, *, resume: bool
) -> RunSpec:
    """``spec`` with the curriculum the flags ask for (``spec`` itself when they ask for none); its
    plan is written to ``out_dir``. ValueError/AresError for a bad spec or source."""
    if sampler is None and not sources:
        return spec
    chosen = parse_sampler(sampler) if sampler is not None else InOrder()
    store_path, plan_path = out_dir / STORE_NAME, out_dir / PLAN_NAME
    if resume and store_path.exists():
        store = PassRateStore.load(store_path)
    else:
        store = PassRateStore()
        for source in sources:
            seed_store(store, source)
    plan = _read_plan(plan_path) if resume and plan_path.exists() else None
    curriculum = Curriculum(chosen, store, store_path, plan)
    spec = replace(spec, curriculum=curriculum)
    if plan is None:
        drawn = spec.group_tasks() or []
        out_dir.mkdir(parents=True, exist_ok=True)
        plan_path.write_text(json.dumps([spec.tasks[i].id for i in drawn]) + "\n")
    return spec


def seed_store(store: PassRateStore, source: Path) -> int:
    """Add what ``source`` measured to ``store``: an ``ares run`` directory, a validation report, or
    a saved store; the number of outcomes added."""
    if source.is_dir():
        return seed_from_run(store, source)
    if not source.is_file():
        raise AresError(f"--pass-rates {source}: no such file or directory")
    try:
        data = json.loads(source.read_text())
    except (OSError, ValueError) as exc:
        raise AresError(f"--pass-rates {source}: not readable JSON ({exc})") from None
    if isinstance(data, dict) and "format" in data and "tasks" in data and isinstance(data["tasks"], dict):
        earlier = PassRateStore.load(source)
        store.merge(earlier)
        return sum(rate.samples for rate in earlier.rates().values())
    return seed_from_validation(store, source)


def _read_plan(path: Path) -> tuple[str, ...]:
    try:
        plan = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise AresError(f"{path}: the run's curriculum plan is unreadable ({exc})") from None
    if not isinstance(plan, list) or not all(isinstance(task, str) for task in plan):
        raise AresError(f"{path}: the run's curriculum plan is not a list of task ids")
    return tuple(plan)
