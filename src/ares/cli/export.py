"""``ares export``: turn recorded episodes into training or interchange files.

Every format is built on the turn view (``ares.records.exports.turns``): a completion always sits
next to the prompt it answered. Re-runs of one episode (``ares run --resume``) are exported once:
the complete trajectory supersedes the partial ones (``ares.records.loader.supersede``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from ares.cli.common import fail, plain_console
from ares.records.exports import (
    FORMATS,
    select,
    write_atif,
    write_sft_jsonl,
    write_steps_parquet,
    write_swebench_predictions,
    write_turns_jsonl,
    write_turns_parquet,
)
from ares.records.loader import load_episodes, supersede
from ares.training.sequences import MissingTokensError, write_sequences_jsonl

console = plain_console()
_DEFAULT_OUT = {
    "sft": "sft.jsonl",
    "turns": "turns.jsonl",
    "parquet": "turns.parquet",
    "steps": "steps.parquet",
    "atif": "atif",
    "sequences": "sequences.jsonl",
    "swebench": "predictions.jsonl",
}
#: The record exports plus RL training sequences (``ares.training``: one per episode, token exact) and
#: SWE-bench predictions (one per SWE instance, for ``ares eval`` or the official harness).
EXPORT_FORMATS = (*FORMATS, "sequences", "swebench")
_HELP_FORMAT = (
    "sft (chat JSONL), turns (turn view JSONL), parquet (turn view Parquet, for HF datasets), "
    "steps (lossless step table Parquet), atif (Harbor ATIF), sequences (token-exact RL samples JSONL), "
    "swebench (SWE-bench predictions.jsonl of SWE episodes)."
)


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
    model_name: Annotated[
        str | None,
        typer.Option(
            "--model-name",
            help="swebench: model_name_or_path of the predictions (default: the model the responses "
            "name, else the run's policy).",
        ),
    ] = None,
) -> None:
    """Export the episodes recorded under DIRECTORY as SFT JSONL, the turn view, Parquet, ATIF,
    token-exact RL sequences or SWE-bench predictions."""
    if fmt not in EXPORT_FORMATS:
        raise fail(f"unknown format {fmt!r}; choose one of: {', '.join(EXPORT_FORMATS)}")
    if per_turn and fmt != "sft":
        raise fail("--per-turn applies to --format sft only (the turn view is already one row per turn)")
    if model_name is not None and fmt != "swebench":
        raise fail("--model-name applies to --format swebench only")
    if not directory.exists():
        raise fail(f"{directory} does not exist")
    source = directory / "trajectories" if (directory / "trajectories").is_dir() else directory
    try:
        episodes, superseded = supersede(load_episodes(source, keep_superseded=True))
    except (ValueError, OSError, KeyError, TypeError) as exc:
        raise fail(f"cannot read episode records under {source}: {exc}") from None
    if not episodes:
        raise fail(f"no episode records under {source} (expected ares.trajectory JSON or JSONL files)")
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
        elif fmt == "swebench":
            export = write_swebench_predictions(
                kept, target, model_name=model_name, default_model=_run_policy(directory)
            )
            if not export.predictions:
                target.unlink(missing_ok=True)
                raise fail(
                    f"no SWE episode under {source} recorded a model patch ({'; '.join(export.notes())}); "
                    "run a swebench preset first"
                )
            written = f"{len(export.predictions)} predictions"
            notes.extend(export.notes())
        else:
            paths = write_atif(kept, target)
            written = f"{len(paths)} trajectories"
            if paths.skipped:
                notes.append(
                    f"{len(paths.skipped)} episodes with no steps skipped (ATIF needs at least one step)"
                )
    except (ImportError, MissingTokensError) as exc:
        raise fail(str(exc)) from None
    console.print(f"{len(kept)}/{len(episodes)} episodes -> {written} in {target}")
    for note in notes:
        console.print(f"note: {note}")


def _run_policy(directory: Path) -> str:
    """The policy of the ``ares run`` whose directory this is (its summary.json), else "ares"."""
    try:
        policy = json.loads((directory / "summary.json").read_text()).get("policy")
    except (OSError, ValueError, AttributeError):
        return "ares"
    return policy if isinstance(policy, str) and policy else "ares"
