"""A project's name, version and licence from the files an sdist or checkout carries: PKG-INFO first
(what the release declared), then pyproject's ``[project]``, then setup.cfg's ``[metadata]``; the
licence falls back to the classifiers, then to the first line of the LICENSE file."""

from __future__ import annotations

import configparser
import re
import tomllib
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path
from typing import Any

from ares.errors import TaskError

_LICENCE_FILES = ("LICENSE", "LICENCE", "COPYING")
_VERSION_ASSIGN = re.compile(r"""^__version__\s*(?::\s*str\s*)?=\s*['"]([^'"]+)['"]""", re.M)


@dataclass(frozen=True)
class Metadata:
    """What the release says about itself (empty string: not declared)."""

    name: str
    version: str
    licence: str
    requires_python: str


def read_pyproject(root: Path) -> dict[str, Any]:
    """pyproject.toml as a dict ({} when absent); a malformed file is a TaskError."""
    path = root / "pyproject.toml"
    if not path.is_file():
        return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise TaskError(f"{path.name}: not valid TOML ({exc})") from exc


def read_metadata(root: Path, package_dirs: tuple[str, ...]) -> Metadata:
    """The release's metadata; name and version fall back to the first package and its __version__."""
    fields: list[dict[str, Any]] = [_pkg_info(root), _pyproject(root), _setup_cfg(root)]

    def first(key: str) -> str:
        return next((str(f[key]).strip() for f in fields if f.get(key)), "")

    name = first("name") or (Path(package_dirs[0]).name if package_dirs else "")
    if not name:
        raise TaskError(f"{root}: no project name (no PKG-INFO, pyproject [project] or setup.cfg metadata)")
    version = first("version") or _version_attribute(root, package_dirs) or "0+unknown"
    licence = first("licence") or _classifier_licence(fields) or _licence_file(root)
    return Metadata(name, version, licence, first("requires_python"))


def _pkg_info(root: Path) -> dict[str, Any]:
    path = root / "PKG-INFO"
    if not path.is_file():
        return {}
    msg = HeaderParser().parsestr(path.read_text(encoding="utf-8", errors="replace"))
    licence = msg.get("License-Expression") or (msg.get("License") or "").strip().split("\n")[0]
    return {
        "name": msg.get("Name"),
        "version": msg.get("Version"),
        "licence": licence if licence.upper() != "UNKNOWN" else "",
        "requires_python": msg.get("Requires-Python"),
        "classifiers": msg.get_all("Classifier") or [],
    }


def _pyproject(root: Path) -> dict[str, Any]:
    project = read_pyproject(root).get("project", {})
    if not isinstance(project, dict):
        return {}
    licence = project.get("license")
    if isinstance(licence, dict):  # {text = "..."} is a licence; {file = "..."} leaves it to the file
        licence = str(licence.get("text", "")).strip().split("\n")[0]
    dynamic = project.get("dynamic", [])
    return {
        "name": project.get("name"),
        "version": None if "version" in dynamic else project.get("version"),
        "licence": licence if isinstance(licence, str) else "",
        "requires_python": project.get("requires-python"),
        "classifiers": project.get("classifiers", []),
    }


def _setup_cfg(root: Path) -> dict[str, Any]:
    path = root / "setup.cfg"
    if not path.is_file():
        return {}
    cfg = configparser.ConfigParser(interpolation=None)
    try:
        cfg.read_string(path.read_text(encoding="utf-8", errors="replace"))
    except configparser.Error:
        return {}
    meta = cfg["metadata"] if cfg.has_section("metadata") else {}
    version = meta.get("version", "")
    return {
        "name": meta.get("name"),
        "version": "" if ":" in version else version,  # "attr: pkg.__version__" is not a version
        "licence": meta.get("license", "").strip().split("\n")[0],
        "requires_python": cfg.get("options", "python_requires", fallback=""),
        "classifiers": [c for c in meta.get("classifiers", "").splitlines() if c.strip()],
    }


def _classifier_licence(fields: list[dict[str, Any]]) -> str:
    for f in fields:
        for classifier in f.get("classifiers", []):
            parts = [p.strip() for p in str(classifier).split("::")]
            if parts[0] == "License" and len(parts) > 1:
                return parts[-1]
    return ""


def _licence_file(root: Path) -> str:
    for path in sorted(root.iterdir()):
        if path.is_file() and path.name.upper().startswith(_LICENCE_FILES):
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                if line.strip():
                    return line.strip()
    return ""


def _version_attribute(root: Path, package_dirs: tuple[str, ...]) -> str:
    for pkg in package_dirs:
        for name in ("__init__.py", "_version.py", "__about__.py", "version.py"):
            path = root / pkg / name
            if path.is_file() and (
                m := _VERSION_ASSIGN.search(path.read_text(encoding="utf-8", errors="replace"))
            ):
                return m.group(1)
    return ""
