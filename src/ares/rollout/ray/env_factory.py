"""``PresetEnv``: a ``make_env`` that travels to Ray actors whatever the sandbox backend.

A sandbox factory may hold what cannot leave its process (a Docker client's connection pool and
locks, a cloud SDK session). ``PresetEnv`` carries only names and options (``ares run`` puts its one
loaded ``task_list`` among them, so actors never parse the dataset again); each process builds its
backend's factory once, on first use, and shares it between its environments.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ares.envs.code_env import CodeEnvironment
from ares.presets import make
from ares.sandbox.backends import make_sandbox_factory

_FACTORIES: dict[str, Any] = {}  # backend name -> this process's factory


@dataclass(frozen=True, slots=True)
class PresetEnv:
    """``make(preset, **options)`` on sandbox backend ``backend``, built in the calling process."""

    preset: str
    backend: str = "local"
    options: Mapping[str, Any] = field(default_factory=dict)

    def __call__(self) -> CodeEnvironment:
        factory = _FACTORIES.get(self.backend)
        if factory is None:
            factory = _FACTORIES[self.backend] = make_sandbox_factory(self.backend)
        return make(self.preset, sandbox_factory=factory, **self.options)

    def close(self) -> None:
        """Close the backend factories this process built (an actor calls this as it stops)."""
        factories = list(_FACTORIES.values())
        _FACTORIES.clear()
        for factory in factories:
            closer = getattr(factory, "close", None)
            if callable(closer):
                with contextlib.suppress(Exception):
                    closer()
