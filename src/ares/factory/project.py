"""A project the factory makes tasks from: the pristine release as a one-commit git repository, plus
what the later stages need to know about it (where its code and tests are, what its tests need)."""

from __future__ import annotations

import asyncio
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from ares.errors import TaskError
from ares.factory._proc import run
from ares.factory.gitrepo import commit_tree
from ares.factory.layout import find_package_dirs, find_test_paths
from ares.factory.metadata import read_metadata
from ares.factory.sources import materialise
from ares.factory.testdeps import find_test_deps
from ares.images.build.standins import DEFAULT_PATH


@dataclass(frozen=True)
class Project:
    """A resolved project. ``root`` is a git work tree whose only commit, ``base_commit``, holds the
    release; paths are relative to it; ``python`` is the interpreter version the image runs."""

    name: str
    version: str
    root: Path
    base_commit: str
    package_dirs: tuple[str, ...]
    test_paths: tuple[str, ...]
    test_deps: tuple[str, ...]
    licence: str
    python: str


async def resolve_project(source: str, work: Path, *, python: str | None = None) -> Project:
    """SOURCE (a git repository, a directory, an sdist or a PyPI requirement) as a Project whose repo is
    ``work/repo`` (replaced if present: ``work`` is the caller's scratch dir for this project).
    ``python`` defaults to the host's ``python3`` (what the ``ares/host-python`` base runs)."""
    root = work / "repo"
    await asyncio.to_thread(_fresh_dir, root)
    await materialise(source, root)
    packages = await asyncio.to_thread(find_package_dirs, root)
    tests = await asyncio.to_thread(find_test_paths, root)
    meta = await asyncio.to_thread(read_metadata, root, packages)
    deps = await asyncio.to_thread(find_test_deps, root, meta.name)
    base = await commit_tree(root, f"{meta.name} {meta.version}")
    return Project(
        name=meta.name,
        version=meta.version,
        root=root,
        base_commit=base,
        package_dirs=packages,
        test_paths=tests,
        test_deps=deps,
        licence=meta.licence,
        python=python or await host_python(),
    )


def _fresh_dir(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        raise TaskError(f"{path}: exists and is not a directory")
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)


async def host_python() -> str:
    """The major.minor of the ``python3`` the stand-in base runs (else this interpreter's)."""
    exe = shutil.which("python3", path=DEFAULT_PATH)
    if exe is None:
        return f"{sys.version_info.major}.{sys.version_info.minor}"
    done = await run([exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"])
    return done.stdout.strip() or f"{sys.version_info.major}.{sys.version_info.minor}"
