"""Optional extras a preset needs, checked before anything runs.

An extra is importable modules behind a ``pip install 'ares[NAME]'``. A preset names the extras its
tasks (grading) and its agent need; ``make`` checks them first, so a missing package is one error
naming the extra, not a traceback at import or a failure after every episode has run.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable
from dataclasses import dataclass

from ares.errors import MissingExtraError


@dataclass(frozen=True, slots=True)
class Extra:
    """``pip install 'ares[name]'``: what it is for and the modules that show it is installed."""

    name: str
    purpose: str
    modules: tuple[str, ...]


EXTRAS: dict[str, Extra] = {
    "swe": Extra("swe", "SWE-bench grading (the swebench harness's parsers)", ("swebench", "unidiff")),
    "mswea": Extra("mswea", "the mini-swe-agent code agent", ("minisweagent",)),
}


def missing_module(extra: Extra) -> str | None:
    """The first of ``extra``'s modules that does not import (with why), or None if all do."""
    if extra.name == "mswea":  # mini prints a banner on import unless told not to (see agents.mini_swe)
        os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
    for module in extra.modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            return f"{module} ({exc})"
    return None


def require_extras(names: Iterable[str], *, needed_by: str) -> None:
    """Raise MissingExtraError naming every extra in ``names`` whose modules do not import."""
    missing: list[tuple[Extra, str]] = []
    for name in dict.fromkeys(names):
        extra = EXTRAS[name]
        module = missing_module(extra)
        if module is not None:
            missing.append((extra, module))
    if not missing:
        return
    wanted = ",".join(extra.name for extra, _ in missing)
    what = "; ".join(f"{extra.purpose} needs {module}" for extra, module in missing)
    raise MissingExtraError(f"{needed_by} needs pip install 'ares[{wanted}]': {what}")
