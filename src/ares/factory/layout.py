"""Where a project's code and tests live: its top-level packages (under the root or ``src/``) are what
mutations may touch; its test directories are what validation runs."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from ares.errors import TaskError

#: Top-level directories that are never the project's own code, even with an __init__.py.
NOT_PACKAGES = frozenset(
    {
        "tests",
        "test",
        "testing",
        "docs",
        "doc",
        "examples",
        "example",
        "benchmarks",
        "bench",
        "scripts",
        "tools",
    }
)
_TEST_DIRS = ("tests", "test")
_SKIP = frozenset({".git", ".tox", ".nox", ".venv", "venv", "node_modules", "__pycache__", "build", "dist"})


def find_package_dirs(root: Path) -> tuple[str, ...]:
    """The top-level packages (dirs with an __init__.py) under ``root`` or ``root/src``, sorted."""
    found: list[str] = []
    for base in (root, root / "src"):
        if not base.is_dir():
            continue
        for child in sorted(base.iterdir()):
            if (
                child.is_dir()
                and not child.is_symlink()
                and child.name.isidentifier()
                and child.name.lower() not in NOT_PACKAGES
                and (child / "__init__.py").is_file()
            ):
                found.append(child.relative_to(root).as_posix())
    if not found:
        raise TaskError(
            f"{root}: no Python package found (a directory with __init__.py at the top or under src/)"
        )
    return tuple(found)


def find_test_paths(root: Path) -> tuple[str, ...]:
    """The directories holding the tests: every dir with a ``test_*.py``/``*_test.py``, cut at its
    topmost ``tests``/``test`` ancestor, minus those inside another; sorted."""
    dirs: set[PurePosixPath] = set()
    for folder, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if d not in _SKIP and not d.startswith("."))
        if any(f.endswith(".py") and (f.startswith("test_") or f.endswith("_test.py")) for f in files):
            rel = PurePosixPath(Path(folder).relative_to(root).as_posix())
            cut = next((i for i, part in enumerate(rel.parts) if part in _TEST_DIRS), None)
            dirs.add(PurePosixPath(*rel.parts[: cut + 1]) if cut is not None else rel)
    if not dirs:
        raise TaskError(f"{root}: no tests found (no test_*.py or *_test.py file)")
    kept = [d for d in dirs if not any(o != d and d.is_relative_to(o) for o in dirs)]
    return tuple(sorted(d.as_posix() for d in kept))
