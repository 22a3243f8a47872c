"""SWE-bench predictions files: one model patch per instance, read and written as the harness does.

A prediction is ``{"instance_id", "model_name_or_path", "model_patch"}``. Files are JSONL (one row a
line) or JSON: a list of rows, or an object keyed by instance id (SWE-agent's ``preds.json``), the
shapes the official harness accepts. A patch that is ``null`` or ``""`` is empty: the harness does not
run it and counts it apart (``empty_patch_instances``).

Unlike the harness (which keeps the last of two rows for one instance and fails on a missing field
with a bare ``KeyError``), a bad row here is an error naming its line and field, and a repeated id
names both lines: a predictions file that says two things about one instance is a mistake.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ares.errors import TaskError

PREDICTION_FIELDS = ("instance_id", "model_name_or_path", "model_patch")


class PredictionsError(TaskError):
    """A predictions file that cannot be read: the message names the file, line and field."""


@dataclass(frozen=True)
class Prediction:
    """One instance's model patch (``None``: the model gave none) and who made it."""

    instance_id: str
    model_patch: str | None
    model_name_or_path: str = ""
    #: Where the row came from ("preds.jsonl line 3"), for messages.
    where: str = ""

    @property
    def empty(self) -> bool:
        """The harness's rule: a ``None`` or ``""`` patch is not run (counted as an empty patch)."""
        return self.model_patch in (None, "")

    def to_json(self) -> dict[str, Any]:
        """The row as the harness reads it."""
        return {
            "instance_id": self.instance_id,
            "model_name_or_path": self.model_name_or_path,
            "model_patch": self.model_patch,
        }


def load_predictions(path: str | Path) -> list[Prediction]:
    """Every prediction in ``path`` (``.jsonl`` or ``.json``), in file order; PredictionsError on a bad
    file, row or field, or on an instance id given twice."""
    path = Path(path)
    if not path.is_file():
        raise PredictionsError(f"{path}: no such predictions file")
    predictions: list[Prediction] = []
    seen: dict[str, str] = {}
    for where, row in _rows(path):
        prediction = parse_prediction(row, where)
        if prediction.instance_id in seen:
            raise PredictionsError(
                f"{where}: instance_id {prediction.instance_id!r} was already predicted at "
                f"{seen[prediction.instance_id]}; keep one prediction per instance"
            )
        seen[prediction.instance_id] = where
        predictions.append(prediction)
    if not predictions:
        raise PredictionsError(f"{path}: holds no predictions")
    return predictions


def parse_prediction(row: Any, where: str) -> Prediction:
    """One row checked: ``instance_id`` a non-empty string, ``model_patch`` a string or null,
    ``model_name_or_path`` (optional) a string."""
    if not isinstance(row, Mapping):
        raise PredictionsError(f"{where}: a prediction must be a JSON object, got {type(row).__name__}")
    instance_id = row.get("instance_id")
    if not isinstance(instance_id, str) or not instance_id.strip():
        found = "missing" if "instance_id" not in row else f"{instance_id!r}"
        raise PredictionsError(f"{where}: field 'instance_id' must be a non-empty string ({found})")
    if "model_patch" not in row:
        raise PredictionsError(f"{where}: field 'model_patch' is missing (null or \"\" for no patch)")
    patch = row["model_patch"]
    if patch is not None and not isinstance(patch, str):
        raise PredictionsError(
            f"{where}: field 'model_patch' must be a string (a unified diff) or null, got "
            f"{type(patch).__name__}"
        )
    model = row.get("model_name_or_path")
    if model is not None and not isinstance(model, str):
        raise PredictionsError(
            f"{where}: field 'model_name_or_path' must be a string, got {type(model).__name__}"
        )
    return Prediction(instance_id, patch, model or "", where)


def _rows(path: Path) -> Iterator[tuple[str, Any]]:
    suffix = path.suffix.lower()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PredictionsError(f"{path}: cannot be read ({exc})") from exc
    if suffix == ".jsonl":
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise PredictionsError(f"{path} line {number}: invalid JSON ({exc.msg})") from exc
            yield f"{path} line {number}", row
    elif suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise PredictionsError(f"{path}: invalid JSON ({exc.msg} at line {exc.lineno})") from exc
        if isinstance(data, Mapping):  # SWE-agent's preds.json: instance id -> prediction
            for key, row in data.items():
                yield f"{path} key {key!r}", row
        elif isinstance(data, list):
            for number, row in enumerate(data, 1):
                yield f"{path} row {number}", row
        else:
            raise PredictionsError(
                f"{path}: expected a list of predictions or an object keyed by instance id"
            )
    else:
        raise PredictionsError(f"{path}: unknown file type {suffix or '(none)'}; use .jsonl or .json")


def write_predictions(predictions: Iterable[Prediction], path: str | Path) -> int:
    """Write ``predictions`` as JSONL (atomically); the number written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    count = 0
    with open(tmp, "w", encoding="utf-8") as f:
        for prediction in predictions:
            f.write(json.dumps(prediction.to_json(), ensure_ascii=False) + "\n")
            count += 1
    os.replace(tmp, path)
    return count
