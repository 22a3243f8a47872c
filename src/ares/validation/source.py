"""What a bare path given to ``ares tasks validate`` holds: Harbor tasks or SWE-bench-format instances.

A directory with ``task.toml`` or ``instruction.md`` (a Harbor task), or with subdirectories that have
them (a Harbor dataset), is Harbor; any other file or directory is taken for SWE instances (JSONL,
JSON, Parquet, a saved or Hub-layout dataset dir), whose loader says what is wrong with it.
"""

from __future__ import annotations

from pathlib import Path

from ares.errors import TaskError

#: Files that make a directory a Harbor task (instruction.md alone: a task that lost its task.toml).
_HARBOR_MARKERS = ("task.toml", "instruction.md")


def preset_for_path(path: Path) -> str:
    """The preset that loads ``path``: ``harbor`` or ``swebench``."""
    if not path.exists():
        raise TaskError(f"{path}: no such file or directory")
    if path.is_dir() and (_is_harbor_task(path) or any(_is_harbor_task(child) for child in _subdirs(path))):
        return "harbor"
    return "swebench"


def _is_harbor_task(path: Path) -> bool:
    return any((path / name).is_file() for name in _HARBOR_MARKERS)


def _subdirs(path: Path) -> list[Path]:
    try:
        return [child for child in path.iterdir() if child.is_dir()]
    except OSError:
        return []
