"""The Task model: what to do, where to do it, and how the result is checked."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ares.sandbox.base import FileMap, ImageSpec, Resources, SandboxSpec, SeccompPolicy

#: A set of files for a task: a host directory, or in-memory files (relative path -> content).
FileSource = Path | FileMap


@dataclass(frozen=True)
class Task:
    """One task. ``tests`` must contain ``test.sh``, which writes /logs/verifier/reward.{json,txt}.

    ``workspace`` files are placed in ``workdir`` before the agent starts. ``solution`` (the oracle)
    contains ``solve.sh``, run from ``workdir`` with the solution files in /solution.
    """

    id: str
    instruction: str
    tests: FileSource
    image: ImageSpec = field(default_factory=ImageSpec)
    resources: Resources = field(default_factory=Resources)
    network: bool = False
    #: The sandbox's syscall filter (a task that profiles or traces may need to relax it).
    seccomp: SeccompPolicy = field(default_factory=SeccompPolicy)
    workdir: str = "/workspace"
    env: Mapping[str, str] = field(default_factory=dict)
    agent_timeout_s: float = 600.0
    command_timeout_s: float = 120.0
    verifier_timeout_s: float = 300.0
    verifier_env: Mapping[str, str] = field(default_factory=dict)
    workspace: FileMap = field(default_factory=dict)
    solution: FileSource | None = None
    source: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def sandbox_spec(self) -> SandboxSpec:
        return SandboxSpec(
            image=self.image,
            resources=self.resources,
            network=self.network,
            seccomp=self.seccomp,
            workdir=self.workdir,
            env=dict(self.env),
        )
