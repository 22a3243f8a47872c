"""The PRESET|PATH argument of ``ares tasks validate`` and ``ares tasks audit``, and what it names."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ares.cli.common import fail
from ares.errors import AresError
from ares.presets import PRESETS
from ares.validation import preset_for_path

SourceArgument = Annotated[
    str,
    typer.Argument(
        help="A preset (see `ares presets`; its --path, --split, ... as for `ares run`), or a path: a "
        "Harbor task or dataset dir, or SWE-bench-format instances (a file or a dataset dir).",
        metavar="PRESET|PATH",
    ),
]


def resolve_source(source: str, path: Path | None) -> tuple[str, Path | None]:
    """The preset and --path that ``source`` names: a preset as is, a path with the preset that loads it."""
    if source in PRESETS:
        return source, path
    candidate = Path(source)
    if not candidate.exists():
        raise fail(f"{source!r} is neither a preset (see `ares presets`) nor an existing path")
    if path is not None:
        raise fail(f"give the tasks once: a PATH argument ({source}) or a preset with --path, not both")
    try:
        return preset_for_path(candidate), candidate
    except AresError as exc:
        raise fail(str(exc)) from None
