"""Read SWE instances from wherever a researcher keeps them.

Sources: a JSONL file, a JSON file (a list, ``{"instances": [...]}`` or ``{split: [...]}``), a Parquet
file (pyarrow), a directory saved by ``datasets`` (``save_to_disk``), a directory of such data files
(the Hugging Face Hub layout, ``data/test-00000-of-00001.parquet``), or a Hub dataset name
(``SWE-bench/SWE-bench_Verified``) read through ``datasets`` when the machine is online. pyarrow and
datasets are optional: a source that needs one names the package to install.

Rows are parsed by ``formats.parse_row``. A bad row stops the load with its error unless
``skip_bad=True``, which loads the rest and reports each skipped row in ``SweDataset.skipped``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ares.errors import TaskError
from ares.tasks.swe.formats import parse_row
from ares.tasks.swe.instance import SweFormat, SweInstance

log = logging.getLogger(__name__)

_DATA_SUFFIXES = (".jsonl", ".json", ".parquet")
#: A directory with ``instances.<suffix>`` at its top is read from that file alone: the layout of the
#: fixtures, of ``ares tasks synth`` and of most hand-made sets (side files sit next to it).
_MAIN_STEM = "instances"
#: Side files a task directory may hold next to its instances; never read as rows.
_SIDE_FILES = frozenset({"specs.json", "validation.json", "report.json", "predictions.jsonl", "summary.json"})
#: Subdirectories that hold images or outputs, not rows.
_SIDE_DIRS = frozenset({"images", "bundles", "episodes", "trajectories"})
#: Files that mark a directory written by ``datasets``' ``save_to_disk``.
_SAVED_MARKERS = ("dataset_info.json", "state.json", "dataset_dict.json")


@dataclass(frozen=True)
class SkippedRow:
    """A row left out by ``skip_bad=True``: where it was and why."""

    where: str
    reason: str


@dataclass(frozen=True)
class SweDataset:
    """The instances of one source, in file order, and the rows skipped on the way."""

    source: str
    instances: tuple[SweInstance, ...]
    skipped: tuple[SkippedRow, ...] = ()

    def __len__(self) -> int:
        return len(self.instances)

    def __iter__(self) -> Iterator[SweInstance]:
        return iter(self.instances)

    def by_id(self, instance_id: str) -> SweInstance:
        for instance in self.instances:
            if instance.instance_id == instance_id:
                return instance
        raise TaskError(f"{self.source}: no instance {instance_id!r}; check the id (ids are case-sensitive)")


def load_swe_instances(
    source: str | Path,
    *,
    split: str | None = None,
    skip_bad: bool = False,
    format: SweFormat | None = None,
) -> SweDataset:
    """Load every instance of ``source`` (a file, a directory or a Hub dataset name).

    ``split`` picks a split of a saved dataset, a JSON file keyed by split, a Hub layout directory or a
    Hub dataset (default ``test``); a single JSONL/Parquet file is one split and ignores it.
    ``format`` forces the row shape (see ``formats.parse_row``). Duplicate instance ids are an error.
    """
    instances: list[SweInstance] = []
    skipped: list[SkippedRow] = []
    seen: dict[str, str] = {}
    for where, row in read_rows(source, split=split):
        try:
            instance = parse_row(row, where=where, format=format)
            if instance.instance_id in seen:
                raise TaskError(
                    f"{where}: instance_id {instance.instance_id!r} repeats {seen[instance.instance_id]}; "
                    "give each instance its own id"
                )
        except TaskError as exc:
            if not skip_bad:
                raise
            skipped.append(SkippedRow(where, str(exc)))
            log.warning("skipped a bad SWE row: %s", exc)
            continue
        seen[instance.instance_id] = where
        instances.append(instance)
    if not instances and not skipped:
        raise TaskError(f"{source}: holds no instances; check the path and the split")
    return SweDataset(str(source), tuple(instances), tuple(skipped))


def read_rows(source: str | Path, *, split: str | None = None) -> Iterator[tuple[str, Any]]:
    """Yield ``(where, row)`` for every raw row of ``source``; ``where`` locates it for errors."""
    path = Path(source)
    if path.is_file():
        yield from _file_rows(path, split)
    elif path.is_dir():
        yield from _dir_rows(path, split)
    elif isinstance(source, str) and _looks_like_hub_name(source):
        yield from _hub_rows(source, split)
    else:
        raise TaskError(
            f"{source} does not exist; pass a .jsonl/.json/.parquet file, a dataset directory or a "
            "Hugging Face dataset name such as SWE-bench/SWE-bench_Verified"
        )


def _file_rows(path: Path, split: str | None) -> Iterator[tuple[str, Any]]:
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        yield from _jsonl_rows(path)
    elif suffix == ".json":
        yield from _json_rows(path, split)
    elif suffix == ".parquet":
        yield from _parquet_rows(path)
    else:
        raise TaskError(f"{path}: unknown file type {suffix or '(none)'}; use .jsonl, .json or .parquet")


def _jsonl_rows(path: Path) -> Iterator[tuple[str, Any]]:
    with _open_text(path) as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise TaskError(f"{path} line {number}: invalid JSON ({exc.msg}); fix that line") from exc
            yield f"{path} line {number}", row


def _json_rows(path: Path, split: str | None) -> Iterator[tuple[str, Any]]:
    with _open_text(path) as handle:
        try:
            data = json.load(handle)
        except json.JSONDecodeError as exc:
            raise TaskError(f"{path}: invalid JSON ({exc.msg} at line {exc.lineno}); fix it") from exc
    if isinstance(data, dict):
        if "instances" in data:
            data = data["instances"]
        elif split is not None and split in data:
            data = data[split]
        else:
            splits = ", ".join(sorted(key for key, value in data.items() if isinstance(value, list)))
            hint = f"pass --split ({splits})" if splits else 'write a list or {"instances": [...]}'
            raise TaskError(f"{path}: a JSON object needs an 'instances' list or a split; {hint}")
    if not isinstance(data, list):
        raise TaskError(f"{path}: expected a list of instances, got {type(data).__name__}")
    for number, row in enumerate(data, 1):
        yield f"{path} row {number}", row


def _parquet_rows(path: Path) -> Iterator[tuple[str, Any]]:
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise TaskError(f"{path}: reading Parquet needs pyarrow; pip install pyarrow") from exc
    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several types for a bad file
        raise TaskError(f"{path}: not a readable Parquet file ({exc})") from exc
    for number, row in enumerate(table.to_pylist(), 1):
        yield f"{path} row {number}", row


def _dir_rows(path: Path, split: str | None) -> Iterator[tuple[str, Any]]:
    if any((path / marker).is_file() for marker in _SAVED_MARKERS):
        yield from _saved_rows(path, split)
        return
    main = [path / f"{_MAIN_STEM}{suffix}" for suffix in _DATA_SUFFIXES]
    main = [file for file in main if file.is_file()]
    if main and split is None:
        for file in main:
            yield from _file_rows(file, split)
        return
    files = sorted(file for file in path.rglob("*") if _is_data_file(file, path))
    if split is not None:
        files = [file for file in files if file.name.startswith(split) or file.parent.name == split]
    if not files:
        which = f" for split {split!r}" if split else ""
        raise TaskError(f"{path}: no .jsonl/.json/.parquet files{which}; point at a file or a dataset dir")
    for file in files:
        yield from _file_rows(file, split)


def _is_data_file(file: Path, root: Path) -> bool:
    """A data file of a Hub-layout or hand-made directory: not a side file, not under an image dir."""
    if file.suffix.lower() not in _DATA_SUFFIXES or file.name in _SIDE_FILES or not file.is_file():
        return False
    return not any(part in _SIDE_DIRS or part.startswith(".") for part in file.relative_to(root).parts[:-1])


def _saved_rows(path: Path, split: str | None) -> Iterator[tuple[str, Any]]:
    try:
        import datasets
    except ImportError as exc:
        raise TaskError(f"{path}: a saved dataset directory needs `datasets`; pip install datasets") from exc
    try:
        loaded = datasets.load_from_disk(str(path))
    except Exception as exc:  # datasets raises FileNotFoundError, ValueError, ...
        raise TaskError(f"{path}: not a readable saved dataset ({exc})") from exc
    if isinstance(loaded, datasets.DatasetDict):
        loaded = _pick_split(loaded, split, str(path))
    where = f"{path}[{split}]" if split else str(path)
    for number, row in enumerate(loaded, 1):
        yield f"{where} row {number}", row


def _pick_split(splits: Any, split: str | None, where: str) -> Any:
    names = list(splits.keys())
    if split is None and len(names) == 1:
        return splits[names[0]]
    if split is None or split not in splits:
        asked = f"split {split!r} is not there" if split else "it has several splits"
        raise TaskError(f"{where}: {asked}; pass --split with one of {', '.join(names)}")
    return splits[split]


def _looks_like_hub_name(text: str) -> bool:
    owner, sep, name = text.partition("/")
    return bool(sep and owner and name and "/" not in name and not text.startswith((".", "~")))


def _hub_rows(name: str, split: str | None) -> Iterator[tuple[str, Any]]:
    try:
        import datasets
    except ImportError as exc:
        raise TaskError(f"loading {name} by name needs `datasets`; pip install datasets") from exc
    chosen = split or "test"
    try:
        loaded = datasets.load_dataset(name, split=chosen)
    except Exception as exc:  # offline, unknown name, unknown split: all surface here
        raise TaskError(
            f"could not load the Hugging Face dataset {name!r} (split {chosen!r}): {exc}; this needs "
            "the network (or a warm datasets cache); offline, download it elsewhere and pass the file "
            "or the save_to_disk directory instead"
        ) from exc
    for number, row in enumerate(loaded, 1):
        yield f"{name}[{chosen}] row {number}", row


def _open_text(path: Path) -> Any:
    try:
        return path.open(encoding="utf-8")
    except OSError as exc:
        raise TaskError(f"{path}: cannot be read ({exc.strerror}); check the path and permissions") from exc
