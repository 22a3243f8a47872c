"""The pip requirements a project's test suite needs, from what the project declares: pyproject's test
extras and dependency groups (``dev`` only when no test group exists), requirements-test files and
tox's ``deps``. Coverage, linters, type checkers, docs and release tools are dropped (the image runs
the tests, nothing else), and ``pytest`` is always there."""

from __future__ import annotations

import configparser
import re
from pathlib import Path
from typing import Any

from ares.factory.metadata import read_pyproject

_TEST_KEYS = ("test", "tests", "testing")
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
#: Normalised names (and prefixes ending in "-") that do not help run the tests.
NOISE = frozenset(
    {
        "coverage", "pytest-cov", "codecov", "coveralls", "flake8", "pyflakes", "pycodestyle", "pydocstyle",
        "pylint", "mypy", "pyright", "black", "isort", "ruff", "pre-commit", "pre-commit-uv", "tox", "tox-uv",
        "nox", "sphinx", "furo", "twine", "build", "wheel", "check-manifest", "bandit", "pytest-randomly",
        "pytest-xdist", "pytest-sugar", "pytest-benchmark", "ipython", "ipdb", "pdbpp", "setuptools-scm",
    }
)  # fmt: skip
NOISE_PREFIXES = ("types-", "flake8-", "sphinx-", "sphinxcontrib-", "mypy-")


def normalise(name: str) -> str:
    """PEP 503's normal form of a distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    """The normalised distribution name a requirement string names ('' when it names none)."""
    m = _NAME.match(requirement)
    return normalise(m.group(1)) if m else ""


def find_test_deps(root: Path, project_name: str) -> tuple[str, ...]:
    """The test requirements, in declaration order, without duplicates or noise; pytest first if absent."""
    pyproject = read_pyproject(root)
    found = _extras(pyproject) + _groups(pyproject) + _requirement_files(root) + _tox_deps(root)
    own = normalise(project_name)
    kept: list[str] = []
    for req in found:
        name = requirement_name(req)
        if name and name != own and not _noise(name) and req not in kept:
            kept.append(req)
    if not any(requirement_name(r) == "pytest" for r in kept):
        kept.insert(0, "pytest")
    return tuple(kept)


def _noise(name: str) -> bool:
    return name in NOISE or name.startswith(NOISE_PREFIXES)


def _extras(pyproject: dict[str, Any]) -> list[str]:
    extras = pyproject.get("project", {}).get("optional-dependencies", {})
    return [str(r) for key in _TEST_KEYS for r in extras.get(key, [])]


def _groups(pyproject: dict[str, Any]) -> list[str]:
    groups = pyproject.get("dependency-groups", {})
    if not isinstance(groups, dict):
        return []
    keys = [k for k in _TEST_KEYS if k in groups] or (["dev"] if "dev" in groups else [])
    return [r for key in keys for r in _group(groups, key, set())]


def _group(groups: dict[str, Any], key: str, seen: set[str]) -> list[str]:
    """A dependency group with its ``{include-group = ...}`` entries expanded (cycles ignored)."""
    if key in seen:
        return []
    seen.add(key)
    out: list[str] = []
    for entry in groups.get(key, []):
        if isinstance(entry, str):
            out.append(entry)
        elif isinstance(entry, dict) and isinstance(entry.get("include-group"), str):
            out.extend(_group(groups, entry["include-group"], seen))
    return out


def _requirement_files(root: Path) -> list[str]:
    patterns = (
        "requirements-test*.txt",
        "requirements_test*.txt",
        "test-requirements*.txt",
        "requirements/test*.txt",
    )
    files = sorted({p for pattern in patterns for p in root.glob(pattern) if p.is_file()})
    return [r for path in files for r in _read_requirements(path, root, set())]


def _read_requirements(path: Path, root: Path, seen: set[Path]) -> list[str]:
    """A requirements file's requirement lines, following ``-r`` includes inside the project."""
    path = path.resolve()
    if path in seen or not path.is_file() or not path.is_relative_to(root.resolve()):
        return []
    seen.add(path)
    out: list[str] = []
    for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
        line = raw.split(" #")[0].strip()
        if line.startswith(("-r ", "--requirement ")):
            out.extend(_read_requirements(path.parent / line.split(maxsplit=1)[1], root, seen))
        elif line and not line.startswith(("#", "-")):
            out.append(line)
    return out


def _tox_deps(root: Path) -> list[str]:
    path = root / "tox.ini"
    if not path.is_file():
        return []
    cfg = configparser.ConfigParser(interpolation=None)
    try:
        cfg.read_string(path.read_text(encoding="utf-8", errors="replace"))
    except configparser.Error:
        return []
    out: list[str] = []
    for raw in cfg.get("testenv", "deps", fallback="").splitlines():
        line = raw.split(" #")[0].strip()
        if line.startswith("-r"):
            out.extend(_read_requirements(root / line[2:].strip().replace("{toxinidir}/", ""), root, set()))
        elif (
            line
            and "{" not in line
            and not re.match(r"^[\w,.-]+:\s", line)
            and not line.startswith(("#", "-"))
        ):
            out.append(line)
    return out
