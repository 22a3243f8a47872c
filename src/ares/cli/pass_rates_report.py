"""``ares tasks stats --pass-rates SOURCE``: each task's measured pass rate, as a curriculum sees it."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ares.cli.curriculum_flags import STORE_NAME, seed_store
from ares.curriculum import PassRateStore, Pools


def load_pass_rates(source: Path) -> PassRateStore:
    """The store of an ``ares run`` directory (its pass_rates.json, else its episodes), or one seeded
    from a store file or a validation report."""
    saved = source / STORE_NAME if source.is_dir() else None
    if saved is not None and saved.exists():
        return PassRateStore.load(saved)
    store = PassRateStore()
    seed_store(store, source)
    return store


def print_pass_rates(console: Console, store: PassRateStore, *, as_json: bool) -> None:
    """A row per task (hardest first), and how many tasks fall in each of ``Pools``' default pools."""
    rates = sorted(store.rates().values(), key=lambda r: (r.rate if r.rate is not None else 2.0, r.task_id))
    if as_json:
        rows = [{"task_id": r.task_id, "passes": r.passes, "samples": r.samples, "rate": r.rate, "ema": r.ema}
                for r in rates]  # fmt: skip
        console.print_json(json.dumps({"newest_version": store.newest_version, "tasks": rows}))
        return
    title = f"pass rates (window {store.window})"
    table = Table("task", "passes", "samples", "pass rate", "ema", title=title)
    for r in rates:
        rate = "-" if r.rate is None else f"{r.rate:.0%}"
        ema = "-" if r.ema is None else f"{r.ema:.2f}"
        table.add_row(r.task_id, str(r.passes), str(r.samples), rate, ema)
    console.print(table)
    pools = Pools()
    counts = [0, 0, 0]  # Pools.pool: 0 easy, 1 normal, 2 hard
    for r in rates:
        counts[pools.pool(r.rate, r.samples)] += 1
    console.print(
        f"{len(rates)} tasks measured: easy {counts[0]} (>= {pools.easy:.0%}), normal {counts[1]}, "
        f"hard {counts[2]} (<= {pools.hard:.0%})"
    )
