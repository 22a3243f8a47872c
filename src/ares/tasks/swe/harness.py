"""Load the SWE-bench harness's grading and log parsers without its heavy dependencies.

ARES grades exactly as the official harness does by calling it, not by re-implementing it: the parsers
carry years of per-repository quirks (and fixes to them) that a copy would drift from. But
``swebench/harness/__init__.py`` imports docker, modal and ``datasets`` eagerly, while the two modules we
need (``grading``, ``log_parsers``, plus ``constants``/``infra_failure``) only need ``unidiff``. So the
package's ``__init__`` is skipped: a bare package module stands in for ``swebench.harness`` while the
submodules load. It stays registered (removing it would orphan the loaded submodules): later
``from swebench.harness import run_evaluation`` still works through its ``__path__``, only the eager
attributes of the real ``__init__`` are absent until imported. If the real package was imported first,
it is used as is.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import types
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from ares.errors import MissingExtraError

SWEBENCH_VERSION = "5.0.2"
INSTALL_HINT = f"pip install 'ares[swe]' (swebench=={SWEBENCH_VERSION} and unidiff)"


class SwebenchUnavailable(MissingExtraError):
    """The ``swebench`` package (or ``unidiff``) is not installed; grading needs it."""


@dataclass(frozen=True)
class Harness:
    """The harness modules ARES calls (``grading``, ``log_parsers``, ``constants``) and its TestSpec."""

    grading: Any
    log_parsers: Any
    constants: Any
    test_spec_cls: type
    version: str


def _harness_dir() -> str:
    import swebench  # light: its __init__ imports lazily

    return str(Path(swebench.__file__).parent / "harness")


@cache
def load_harness() -> Harness:
    """Import the harness's grading modules once; raise SwebenchUnavailable with an install hint."""
    try:
        import swebench
        import unidiff  # noqa: F401  (swebench.utils needs it; fail here with a clear message)
    except ImportError as exc:
        raise SwebenchUnavailable(f"SWE-bench grading needs the swebench package: {INSTALL_HINT}") from exc
    stub = None
    if "swebench.harness" not in sys.modules:
        stub = types.ModuleType("swebench.harness")
        stub.__path__ = [_harness_dir()]
        stub.__spec__ = importlib.machinery.ModuleSpec("swebench.harness", None, is_package=True)
        stub.__spec__.submodule_search_locations = stub.__path__
        sys.modules["swebench.harness"] = stub
    try:
        constants = importlib.import_module("swebench.harness.constants")
        log_parsers = importlib.import_module("swebench.harness.log_parsers")
        grading = importlib.import_module("swebench.harness.grading")
        spec_mod = importlib.import_module("swebench.types")
    except ImportError as exc:
        raise SwebenchUnavailable(
            f"swebench's grading modules failed to import ({exc}): {INSTALL_HINT}"
        ) from exc
    return Harness(
        grading=grading,
        log_parsers=log_parsers,
        constants=constants,
        test_spec_cls=spec_mod.TestSpec,
        version=getattr(swebench, "__version__", "?"),
    )


def swebench_available() -> bool:
    """Whether the harness modules import here (tests skip their cross-checks otherwise)."""
    try:
        load_harness()
    except SwebenchUnavailable:
        return False
    return True
