"""``ares export``: turn recorded episodes into training or interchange files.

Every format is built on the turn view (``ares.records.exports.turns``): a completion always sits
next to the prompt it answered. Re-runs of one episode (``ares run --resume``) are exported once:
the complete trajectory supersedes the partial ones (``ares.records.loader.supersede``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from ares.records.exports import (
    FORMATS,
    select,
    write_atif,
    write_sft_jsonl,
    write_steps_parquet,
    write_turns_jsonl,
    write_turns_parquet,
)
from ares.records.loader import load_episodes, supersede
from ares.training.sequences import MissingTokensError, write_sequences_jsonl

console = Console()
err_console = Console(stderr=True)
_DEFAULT_OUT = {
    "sft": "sft.jsonl",
    "turns": "turns.jsonl",
    "parquet": "turns.parquet",
    "steps": "steps.parquet",
    "atif": "atif",
    "sequences": "sequences.jsonl",
}
#: The record exports plus RL training sequences (``ares.training``: one per episode, token exact).
EXPORT_FORMATS = (*FORMATS, "sequences")
_HELP_FORMAT = (
    "sft (chat JSONL), turns (turn view JSONL), parquet (turn view Parquet, for HF datasets), "
    "steps (lossless step table Parquet), atif (Harbor ATIF), sequences (token-exact RL samples JSONL)."
)


def _fail(message: str) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    return typer.Exit(code=2)


def export(
    directory: Annotated[
        Path, typer.Argument(help="Run dir (its trajectories/ is used) or record dir/file.")
    ],
    fmt: Annotated[str, typer.Option("--format", "-f", help=_HELP_FORMAT)] = "sft",
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Output file (a directory for atif).")
    ] = None,
    only_successful: Annotated[
        bool, typer.Option("--only-successful", help="Keep finished episodes with reward > 0.")
    ] = False,
    per_turn: Annotated[
        bool, typer.Option("--per-turn", help="sft: one prompt/completion row per turn.")
    ] = False,
) -> None:
    """Export the episodes recorded under DIRECTORY as SFT JSONL, the turn view, Parquet, ATIF or
    token-exact RL sequences."""
    if fmt not in EXPORT_FORMATS:
        raise _fail(f"unknown format {fmt!r}; choose one of: {', '.join(EXPORT_FORMATS)}")
    if per_turn and fmt != "sft":
        raise _fail("--per-turn applies to --format sft only (the turn view is already one row per turn)")
    if not directory.exists():
        raise _fail(f"{directory} does not exist")
    source = directory / "trajectories" if (directory / "trajectories").is_dir() else directory
    try:
        episodes, superseded = supersede(load_episodes(source, keep_superseded=True))
    except (ValueError, OSError, KeyError, TypeError) as exc:
        raise _fail(f"cannot read episode records under {source}: {exc}") from None
    if not episodes:
        raise _fail(f"no episode records under {source} (expected ares.trajectory JSON or JSONL files)")
    kept = select(episodes, only_successful=only_successful)
    target = out or directory / _DEFAULT_OUT[fmt]
    notes = []
    if superseded:
        notes.append(f"{len(superseded)} partial trajectories superseded by a re-run of their episode")
    try:
        if fmt == "sft":
            shape = "prompt/completion rows" if per_turn else "conversations"
            written = f"{write_sft_jsonl(kept, target, per_turn=per_turn)} {shape}"
        elif fmt == "turns":
            written = f"{write_turns_jsonl(kept, target)} turn rows"
        elif fmt == "parquet":
            written = f"{write_turns_parquet(kept, target)} turn rows"
        elif fmt == "steps":
            written = f"{write_steps_parquet(kept, target)} step rows"
        elif fmt == "sequences":
            written = f"{write_sequences_jsonl(kept, target)} token sequences"
        else:
            paths = write_atif(kept, target)
            written = f"{len(paths)} trajectories"
            if paths.skipped:
                notes.append(
                    f"{len(paths.skipped)} episodes with no steps skipped (ATIF needs at least one step)"
                )
    except (ImportError, MissingTokensError) as exc:
        raise _fail(str(exc)) from None
    console.print(
        f"{len(kept)}/{len(episodes)} episodes -> {written} in {target}", highlight=False, markup=False
    )
    for note in notes:
        console.print(f"note: {note}", highlight=False, markup=False)
