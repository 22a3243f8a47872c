"""resolve_project on the five fixture projects as a directory, an sdist and a git repository: the
declared metadata, layout and test dependencies, and a one-commit repository with a stable sha."""

from __future__ import annotations

from pathlib import Path

import pytest
from synth_sources import git, has_object, make_sdist, plain_dir, repo_with_later_commit

from ares.factory.project import Project, resolve_project

#: name -> (version, licence, package_dirs, test_paths, test_deps)
EXPECTED = {
    "toolz": ("1.2.0", "BSD-3-Clause", ("tlz", "toolz"), ("toolz/sandbox/tests", "toolz/tests"), ("pytest",)),
    "tomlkit": ("0.15.2", "MIT", ("tomlkit",), ("tests",), ("pytest~=7.2", "PyYAML~=6.0")),
    "marshmallow": ("4.4.0", "MIT", ("src/marshmallow",), ("tests",), ("pytest", "simplejson")),
    "boltons": (
        "26.2.0",
        "BSD License",
        ("boltons",),
        ("tests",),
        ("pytest>=7,<8; python_version < '3.8'", "pytest>=8; python_version >= '3.8'"),
    ),
    "click": ("8.5.1", "BSD-3-Clause", ("src/click",), ("tests",), ("pytest",)),
}


def check(project: Project, name: str) -> None:
    version, licence, packages, tests, deps = EXPECTED[name]
    assert (project.name, project.version, project.licence) == (name, version, licence)
    assert (project.package_dirs, project.test_paths, project.test_deps) == (packages, tests, deps)
    assert project.python.count(".") == 1
    commits = git(
        project.root, "log", "--all", "--format=%H|%an|%cn|%ad|%s", "--date=iso-strict"
    ).splitlines()
    assert commits == [
        f"{project.base_commit}|ARES synth|ARES synth|2026-01-01T00:00:00+00:00|{name} {version}"
    ]
    assert git(project.root, "status", "--porcelain", "--ignored") == ""


@pytest.mark.parametrize("name", list(EXPECTED))
async def test_a_directory_and_its_sdist_resolve_to_the_same_commit(
    name: str, clones: dict[str, Path], tmp_path: Path
) -> None:
    from_dir = await resolve_project(str(plain_dir(clones[name], tmp_path / "plain")), tmp_path / "w1")
    check(from_dir, name)
    archive = make_sdist(clones[name], tmp_path, name, EXPECTED[name][0])
    from_sdist = await resolve_project(str(archive), tmp_path / "w2")
    check(from_sdist, name)
    assert from_sdist.base_commit == from_dir.base_commit
    again = await resolve_project(str(archive), tmp_path / "w2")
    assert again == from_sdist


@pytest.mark.parametrize("name", list(EXPECTED))
async def test_a_git_repository_gives_its_head_tree_without_history(
    name: str, clones: dict[str, Path], tmp_path: Path
) -> None:
    source, future = repo_with_later_commit(clones[name], tmp_path / "src")
    first = git(source, "rev-parse", "HEAD~1").strip()
    (source / "PKG-INFO").write_text("uncommitted edits are not part of HEAD\n")
    project = await resolve_project(str(source), tmp_path / "work")
    check(project, name)
    assert (project.root / "FUTURE.txt").read_text() == "the fix from the future\n"
    assert (project.root / "PKG-INFO").read_text() == git(source, "show", "HEAD:PKG-INFO")
    assert git(project.root, "rev-list", "--all").split() == [project.base_commit]
    assert not has_object(project.root, future) and not has_object(project.root, first)
    assert git(source, "status", "--porcelain").strip() == "M PKG-INFO"  # the source repo is untouched
