"""``ares datasets list``: the datasets of a Harbor registry, for ``ares run harbor --dataset``."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from ares.cli.common import App, fail, plain_console
from ares.cli.run_options import RegistryOption
from ares.errors import AresError

app = App(help="Datasets of a Harbor registry (for `ares run harbor --dataset`).", no_args_is_help=True)
console = plain_console()


@app.command("list")
def list_datasets(
    registry: RegistryOption = None,
    name: Annotated[str | None, typer.Argument(help="Only datasets whose name contains this.")] = None,
) -> None:
    """List NAME@VERSION, task count and description of each dataset of the registry."""
    from ares.tasks.harbor_registry import datasets_cache, read_registry

    try:
        found = read_registry(registry, datasets_cache() / "registries")
    except AresError as exc:
        raise fail(str(exc)) from None
    table = Table("dataset", "tasks", "description", title=found.origin)
    for dataset in found.datasets:
        if name is None or name.lower() in dataset.name.lower():
            table.add_row(dataset.label, str(len(dataset.raw_tasks)), dataset.description)
    console.print(table)
