"""Parquet (and Hugging Face ``datasets``): the turn view for training, the step table for archiving.

Two tables, each in its own file:

- **turns** (``write_turns_parquet``, ``to_hf_dataset``): one row per policy decision, the columns of
  ``ares.records.exports.turns`` (``TURN_FIELDS``). Row t's ``completion`` answers row t's ``prompt``;
  nothing is shifted. ``prompt`` is a list of messages and ``completion`` one message, typed as
  ``{role, content, name, tool_call_id, tool_calls: [{id, type, function: {name, arguments}}]}`` so
  ``datasets``/pandas/DuckDB read them without parsing JSON (structured message content is reduced
  to its text parts; ``tools`` is a JSON string). A summary of every episode, those without any
  turn included, is in the file's key-value metadata (``ares.episodes``).
- **steps** (``write_steps_parquet``, lossless): one row per recorded step, as ``StepRecord`` has it:
  row k's ``action`` is what was passed to step k and its ``observation`` what step k returned, so the
  action of row k answers the observation of row k-1 (``prompt_step`` names that row). Observation,
  action and trace are JSON strings; episode fields without a column (env, seed, error, metadata, and
  episodes with no steps) are in the key-value metadata, and ``load_steps_parquet`` rebuilds the
  exact records. ``write_parquet``/``load_parquet``/``to_arrow`` are the step table's older names.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ares.records.exports.turns import TURN_FIELDS, episode_fact, episode_reward, turn_rows, turns
from ares.records.model import EpisodeRecord

if TYPE_CHECKING:
    import datasets
    import pyarrow as pa

EPISODES_KEY = b"ares.episodes"
VIEW_KEY = b"ares.view"

COLUMNS: dict[str, str] = {
    "episode_id": "string",
    "task_id": "string",
    "step": "int64",
    "prompt_step": "int64",
    "step_type": "string",
    "reward": "float64",
    "discount": "float64",
    "started_at": "float64",
    "ended_at": "float64",
    "observation": "string",
    "action": "string",
    "trace": "string",
    "call": "string",
    "episode_status": "string",
    "episode_total_reward": "float64",
}


def _pyarrow() -> Any:
    try:
        import pyarrow
        import pyarrow.parquet  # the submodule is not imported by `import pyarrow`
    except ImportError:
        raise ImportError("Parquet export needs pyarrow: pip install 'ares[parquet]'") from None
    return pyarrow


def _write_table(table: pa.Table, path: Path) -> None:
    pa = _pyarrow()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    pa.parquet.write_table(table, tmp)
    os.replace(tmp, path)


# --- the turn view ---------------------------------------------------------------------------------


def _message_type(pa: Any) -> Any:
    call = pa.struct(
        [("id", pa.string()), ("type", pa.string()),
         ("function", pa.struct([("name", pa.string()), ("arguments", pa.string())]))]
    )  # fmt: skip
    return pa.struct(
        [("role", pa.string()), ("content", pa.string()), ("name", pa.string()),
         ("tool_call_id", pa.string()), ("tool_calls", pa.list_(call))]
    )  # fmt: skip


def turn_schema() -> pa.Schema:
    """The Arrow schema of the turn table (columns in ``TURN_FIELDS`` order)."""
    pa = _pyarrow()
    message = _message_type(pa)
    types = {
        "seed": pa.int64(), "branch_step": pa.int64(), "turn": pa.int64(), "step": pa.int64(),
        "prompt_step": pa.int64(),
        "prompt": pa.list_(message), "completion": message, "prompt_token_ids": pa.list_(pa.int64()),
        "completion_token_ids": pa.list_(pa.int64()), "logprobs": pa.list_(pa.float64()),
        "sequence_start": pa.bool_(), "reward": pa.float64(), "episode_reward": pa.float64(),
        "last_turn": pa.bool_(),
        "policy_latency_s": pa.float64(), "prompt_tokens": pa.int64(), "completion_tokens": pa.int64(),
        "cost_usd": pa.float64(), "episode_outcome": pa.bool_(), "episode_masked": pa.bool_(),
        "policy_version": pa.int64(), "requested_at": pa.float64(), "answered_at": pa.float64(),
        "requested_version": pa.int64(), "queue_s": pa.float64(),
    }  # fmt: skip
    return pa.schema([(name, types.get(name, pa.string())) for name in TURN_FIELDS])


def _content_text(content: Any) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text", "")) for p in content if isinstance(p, Mapping) and p.get("type") == "text"
        )
    return json.dumps(content)


def _arrow_message(message: Mapping[str, Any]) -> dict[str, Any]:
    calls = [
        {"id": c.get("id"), "type": c.get("type"),
         "function": {"name": (c.get("function") or {}).get("name"),
                      "arguments": (c.get("function") or {}).get("arguments")}}
        for c in message.get("tool_calls") or ()
    ]  # fmt: skip
    return {
        "role": message.get("role"),
        "content": _content_text(message.get("content")),
        "name": message.get("name"),
        "tool_call_id": message.get("tool_call_id"),
        "tool_calls": calls or None,
    }


def arrow_turn_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A turn-view row as the turn table stores it (and ``load_turns_parquet`` returns it)."""
    out = dict(row)
    out["prompt"] = None if row["prompt"] is None else [_arrow_message(m) for m in row["prompt"]]
    out["completion"] = _arrow_message(row["completion"])
    out["tools"] = None if row["tools"] is None else json.dumps(row["tools"])
    out["seed"] = row["seed"] if isinstance(row["seed"], int) and not isinstance(row["seed"], bool) else None
    return out


def episode_summaries(episodes: Iterable[EpisodeRecord]) -> list[dict[str, Any]]:
    """One line per episode (with or without turns): what the turn table's metadata keeps."""
    return [
        {
            "episode_id": e.episode_id, "task_id": e.task_id, "group_id": episode_fact(e, "group_id"),
            "seed": e.seed, "status": e.status, "exit_reason": episode_fact(e, "exit_reason"),
            "reward": episode_reward(e), "truncation": e.truncation,
            "error": None if e.error is None else {"type": e.error.type, "message": e.error.message},
            "steps": len(e.steps), "turns": sum(1 for _ in turns(e)),
        }
        for e in episodes
    ]  # fmt: skip


def turns_table(episodes: Iterable[EpisodeRecord]) -> pa.Table:
    """The turn view as an Arrow table (episode summaries in the schema metadata)."""
    pa = _pyarrow()
    episodes = list(episodes)
    rows = [arrow_turn_row(r) for r in turn_rows(episodes)]
    table = pa.Table.from_pylist(rows, schema=turn_schema())
    metadata = {VIEW_KEY: b"turns", EPISODES_KEY: json.dumps(episode_summaries(episodes)).encode()}
    return table.replace_schema_metadata(metadata)


def write_turns_parquet(episodes: Iterable[EpisodeRecord], path: Path) -> int:
    """Write the turn view to one Parquet file (atomically); returns the number of turn rows."""
    table = turns_table(episodes)
    _write_table(table, path)
    return table.num_rows


def load_turns_parquet(path: Path) -> list[dict[str, Any]]:
    """The rows of a file written by ``write_turns_parquet`` (as ``arrow_turn_row`` shapes them)."""
    pa = _pyarrow()
    table = pa.parquet.read_table(path)
    if (table.schema.metadata or {}).get(VIEW_KEY) != b"turns":
        raise ValueError(f"{path}: not an ARES Parquet export of turns (no {VIEW_KEY.decode()!r} metadata)")
    return table.to_pylist()


def load_turn_summaries(path: Path) -> list[dict[str, Any]]:
    """The per-episode summaries kept in a turn table's metadata (episodes without turns included)."""
    pa = _pyarrow()
    metadata = pa.parquet.read_schema(path).metadata or {}
    return json.loads(metadata.get(EPISODES_KEY, b"[]"))


def to_hf_dataset(episodes: Iterable[EpisodeRecord], *, view: str = "turns") -> datasets.Dataset:
    """The turn view (or ``view="steps"``, the step table) as a ``datasets.Dataset``.

    Needs ``pip install 'ares[hf]'``. A file from ``write_turns_parquet`` loads the same rows with
    ``datasets.load_dataset("parquet", data_files=PATH, split="train")``.
    """
    try:
        import datasets
    except ImportError:
        raise ImportError("to_hf_dataset needs the datasets package: pip install 'ares[hf]'") from None
    if view not in ("turns", "steps"):
        raise ValueError(f"view must be 'turns' or 'steps', not {view!r}")
    return datasets.Dataset(turns_table(episodes) if view == "turns" else steps_table(episodes))


# --- the step table (lossless) ---------------------------------------------------------------------


def step_rows(episodes: Iterable[EpisodeRecord]) -> list[dict[str, Any]]:
    """One plain dict per step, in the column layout of ``COLUMNS``."""
    rows = []
    for episode in episodes:
        previous = None
        for step in episode.steps:
            data = step.to_json()
            rows.append(
                {
                    "episode_id": episode.episode_id,
                    "task_id": episode.task_id,
                    "step": step.index,
                    "prompt_step": previous if step.action is not None else None,
                    "step_type": step.step_type,
                    "reward": step.reward,
                    "discount": step.discount,
                    "started_at": step.started_at,
                    "ended_at": step.ended_at,
                    "observation": json.dumps(data["observation"]),
                    "action": json.dumps(data["action"]),
                    "trace": json.dumps(data["trace"]),
                    "call": json.dumps(data["call"]) if "call" in data else None,
                    "episode_status": episode.status,
                    "episode_total_reward": episode.total_reward,
                }
            )
            previous = step.index
    return rows


def steps_table(episodes: Iterable[EpisodeRecord]) -> pa.Table:
    """The episodes as an Arrow table of steps (headers in the schema metadata)."""
    pa = _pyarrow()
    episodes = list(episodes)
    schema = pa.schema([(name, pa.type_for_alias(kind)) for name, kind in COLUMNS.items()])
    headers = []
    for episode in episodes:
        header = episode.to_json()
        header.pop("steps")
        headers.append(header)
    table = pa.Table.from_pylist(step_rows(episodes), schema=schema)
    return table.replace_schema_metadata({VIEW_KEY: b"steps", EPISODES_KEY: json.dumps(headers).encode()})


def write_steps_parquet(episodes: Iterable[EpisodeRecord], path: Path) -> int:
    """Write the episodes' steps to one Parquet file (atomically); returns the number of step rows."""
    table = steps_table(episodes)
    _write_table(table, path)
    return table.num_rows


def load_steps_parquet(path: Path) -> list[EpisodeRecord]:
    """Rebuild the exact EpisodeRecords from a file written by ``write_steps_parquet``."""
    pa = _pyarrow()
    table = pa.parquet.read_table(path)
    metadata = table.schema.metadata or {}
    raw = metadata.get(EPISODES_KEY)
    if raw is None or metadata.get(VIEW_KEY, b"steps") != b"steps":
        raise ValueError(
            f"{path}: not an ARES Parquet export of steps (no {EPISODES_KEY.decode()!r} metadata)"
        )
    steps: dict[str, list[dict[str, Any]]] = {}
    for row in table.to_pylist():
        steps.setdefault(row["episode_id"], []).append(
            {
                "index": row["step"],
                "step_type": row["step_type"],
                "observation": json.loads(row["observation"]),
                "action": json.loads(row["action"]),
                "reward": row["reward"],
                "discount": row["discount"],
                "started_at": row["started_at"],
                "ended_at": row["ended_at"],
                "trace": json.loads(row["trace"]),
                "call": json.loads(row["call"]) if row.get("call") else None,  # older files: no column
            }
        )
    headers = json.loads(raw)
    return [EpisodeRecord.from_json({**h, "steps": steps.get(h["episode_id"], [])}) for h in headers]


# The step table's names before the turn view existed.
to_arrow = steps_table
write_parquet = write_steps_parquet
load_parquet = load_steps_parquet
