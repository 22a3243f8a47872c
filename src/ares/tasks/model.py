"""The Task model: what to do, where to do it, and how the result is checked."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from ares.sandbox.base import (
    DiffSummary,
    ExecResult,
    FileMap,
    ImageSpec,
    Resources,
    Sandbox,
    SandboxSpec,
    SeccompPolicy,
)
from ares.tasks.reward_files import LogFiles

#: A set of files for a task: a host directory, or in-memory files (relative path -> content).
FileSource = Path | FileMap

#: What of the agent's filesystem the verifier sees: ``outputs`` — the pristine image plus only the
#: task's output paths from the agent's diff (so the verifier's tools cannot be replaced); ``full`` —
#: the image plus the agent's whole diff, for tasks whose success is system state; ``in-place`` — the
#: agent's own sandbox, where the agent can tamper with the tests' tools and files: only ever used when
#: a task or a user names it (a backend that cannot fork is otherwise an error, never a fallback).
VerifierMode = Literal["outputs", "full", "in-place"]
VERIFIER_MODES: tuple[VerifierMode, ...] = ("outputs", "full", "in-place")


class Verification(Protocol):
    """A task kind's own way of checking the agent's work, used instead of running ``tests/test.sh``.

    A kind whose grading is not "run a script that writes a reward file" (SWE-bench-format tasks:
    carry the agent's diff into a fresh sandbox, run the eval script, grade its log on the host)
    declares it here, on the task, so the generic verifier dispatches on data rather than on the
    task's origin. ``verify`` returns a ``Verdict`` or raises ``VerifierError`` (an errored episode).
    """

    kind: str

    async def verify(self, task: Task, sandbox: Sandbox) -> Verdict: ...


@dataclass(frozen=True)
class Task:
    """One task. ``tests`` must contain ``test.sh``, which writes /logs/verifier/reward.{json,txt}.

    ``workspace`` files are placed in ``workdir`` before the agent starts. ``solution`` (the oracle)
    contains ``solve.sh``, run from ``workdir`` with the solution files in /solution.
    ``verifier_mode`` and ``outputs`` say what of the agent's filesystem the tests see (see
    ``VerifierMode``); ``outputs`` are absolute paths, the workdir when empty.
    ``solution_file`` names the one file (relative to ``workdir``) that holds a function-level task's
    answer, for agents that write a whole solution in one reply; a ``solution`` may hold its
    reference content at the same relative path.
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
    verifier_mode: VerifierMode = "outputs"
    outputs: tuple[str, ...] = ()
    workspace: FileMap = field(default_factory=dict)
    solution: FileSource | None = None
    solution_file: str | None = None
    #: How the agent's work is checked when not by ``tests/test.sh`` (see ``Verification``).
    verification: Verification | None = None
    source: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def output_paths(self) -> tuple[str, ...]:
        """The paths the verifier carries over from the agent's diff in ``outputs`` mode."""
        return self.outputs or (self.workdir,)

    def sandbox_spec(self) -> SandboxSpec:
        return SandboxSpec(
            image=self.image,
            resources=self.resources,
            network=self.network,
            seccomp=self.seccomp,
            workdir=self.workdir,
            env=dict(self.env),
        )


@dataclass(frozen=True, slots=True)
class Verdict:
    """The verifier's outcome: the scalar reward, its named terms, the test run's output, what the
    tests saw of the agent's filesystem (``mode``: outputs, full, or in-place when they ran in the
    agent's own sandbox), the files they wrote to /logs/verifier, and what the agent changed outside
    its outputs."""

    reward: float
    terms: Mapping[str, float] = field(default_factory=dict)
    output: ExecResult | None = None
    mode: str = "full"
    files: LogFiles = field(default_factory=LogFiles)
    outside: DiffSummary | None = None
