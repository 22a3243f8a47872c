"""Exports of episode records to training and interchange formats, each with a loader that reads it back.

All of them are built on the turn view (``turns``): one row per policy decision, whose completion
answers that row's prompt (the observation before the action), never the next one.

- ``turns``: the turn view itself, as JSONL.
- ``parquet``: the turn view as Parquet / a Hugging Face ``datasets.Dataset``; and the lossless step
  table (one row per recorded step).
- ``sft``: chat/SFT JSONL, one conversation per episode or one prompt/completion pair per turn.
- ``atif``: Harbor's Agent Trajectory Interchange Format, one JSON document per episode.
- ``swebench``: SWE-bench predictions (``instance_id, model_name_or_path, model_patch``) of SWE
  episodes, the agent's diff as the verifier recorded it (not built on the turn view).
"""

from ares.records.exports.atif import (
    AtifStep,
    AtifTrajectory,
    EmptyTrajectoryError,
    WrittenFiles,
    load_atif,
    to_atif,
    validate_atif,
    write_atif,
)
from ares.records.exports.parquet import (
    load_parquet,
    load_steps_parquet,
    load_turns_parquet,
    steps_table,
    to_arrow,
    to_hf_dataset,
    turns_table,
    write_parquet,
    write_steps_parquet,
    write_turns_parquet,
)
from ares.records.exports.sft import SftRow, load_sft_jsonl, sft_row, sft_turn_rows, write_sft_jsonl
from ares.records.exports.swebench import (
    PredictionExport,
    episode_patch,
    swebench_predictions,
    write_swebench_predictions,
)
from ares.records.exports.turns import (
    TURN_FIELDS,
    Turn,
    is_successful,
    load_turns_jsonl,
    select,
    turn_row,
    turn_rows,
    turns,
    write_turns_jsonl,
)

#: ``ares export --format``: sft (JSONL), turns (JSONL), parquet (turn view), steps (Parquet), atif.
FORMATS = ("sft", "turns", "parquet", "steps", "atif")

__all__ = [
    "FORMATS",
    "TURN_FIELDS",
    "AtifStep",
    "AtifTrajectory",
    "EmptyTrajectoryError",
    "PredictionExport",
    "SftRow",
    "Turn",
    "WrittenFiles",
    "episode_patch",
    "is_successful",
    "load_atif",
    "load_parquet",
    "load_sft_jsonl",
    "load_steps_parquet",
    "load_turns_jsonl",
    "load_turns_parquet",
    "select",
    "sft_row",
    "sft_turn_rows",
    "steps_table",
    "swebench_predictions",
    "to_arrow",
    "to_atif",
    "to_hf_dataset",
    "turn_row",
    "turn_rows",
    "turns",
    "turns_table",
    "validate_atif",
    "write_atif",
    "write_parquet",
    "write_sft_jsonl",
    "write_steps_parquet",
    "write_swebench_predictions",
    "write_turns_jsonl",
    "write_turns_parquet",
]
