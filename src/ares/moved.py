"""Old import paths of modules that moved, kept for one release: each still imports, and warns.

The package graph has floors (README, Layout) and a module only imports from lower ones, so an old
path inside a lower package (``ares.tasks.synth``, now the top-floor ``ares.factory``) cannot be a
module that imports the new one. A finder at the front of ``sys.meta_path`` serves the old name
instead: the very module object of the new name (one module, one set of classes), with a
``DeprecationWarning`` naming the new path. Installed by ``import ares``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

#: Old package or module name -> its new name (submodules follow their package).
MOVED: dict[str, str] = {
    "ares.tasks.synth": "ares.factory",
    "ares.tasks.validate": "ares.validation",
    "ares.tasks.swe.evaluation": "ares.evaluation.swe",
    "ares.snapshot.model": "ares.envs.snapshots.model",
    "ares.snapshot.task_codec": "ares.envs.snapshots.task_codec",
    "ares.snapshot.restoring": "ares.envs.snapshots.restoring",
    # One word, one thing: "registry" is an OCI or Harbor registry, "pool" says which, "cli" is the
    # ares command, "trace" a span trace.
    "ares.registry": "ares.presets",
    "ares.sandbox.pool": "ares.sandbox.warm_pool",
    "ares.rollout.pool": "ares.rollout.env_pool",
    "ares.agents.cli": "ares.agents.coding_clis",
    "ares.records.trace": "ares.records.rollout_trace",
}


def new_name(old: str) -> str | None:
    """The current name of module ``old`` if it moved (itself or a package above it), else None."""
    for prefix, target in MOVED.items():
        if old == prefix or old.startswith(prefix + "."):
            return target + old[len(prefix) :]
    return None


class _Alias(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: ModuleSpec) -> None:
        return None  # a placeholder, replaced in sys.modules by exec_module

    def exec_module(self, module: ModuleType) -> None:
        warnings.warn(
            f"{module.__name__} moved to {self.target}; the old path goes in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        # The import system returns what sys.modules holds under the old name once this returns.
        sys.modules[module.__name__] = importlib.import_module(self.target)


class MovedFinder(importlib.abc.MetaPathFinder):
    """Finds the old names of ``MOVED`` (ahead of the path finder, which would load a second copy
    of a moved package's submodule from the new package's ``__path__``)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        moved = new_name(fullname)
        return None if moved is None else importlib.util.spec_from_loader(fullname, _Alias(moved))


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, MovedFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, MovedFinder())
