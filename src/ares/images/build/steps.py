"""The seam between the Dockerfile builder and whatever runs its steps.

The builder decides what each instruction does and caches the result; running a command on top of
a mount plan and capturing its filesystem diff is a sandbox's job. A ``StepRunner`` does that, so
this package never imports a sandbox (the local sandbox implements it in ``sandbox/local``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ares.images.config import ImageConfig
from ares.images.rootfs import RootfsPlan


@dataclass(frozen=True, slots=True)
class BuildCommand:
    """One command of a build: run ``command`` (a shell line) on ``plan`` and write its diff to ``diff_dir``.

    ``diff_dir`` does not exist yet; the runner creates it with one subdir per mount of ``plan`` that
    changed (the layout of a layer's ``fs/``). ``config`` carries the image defaults (user, shell);
    ``env`` is the complete environment of the command (build args, passthrough, image env).
    """

    plan: RootfsPlan
    config: ImageConfig
    command: str
    diff_dir: Path
    scratch_dir: Path
    env: Mapping[str, str] = field(default_factory=dict)
    workdir: str = "/"
    user: str | None = None
    stdin: bytes | None = None
    network: bool = True
    timeout_s: float | None = None


@dataclass(frozen=True, slots=True)
class StepOutcome:
    """How a build command ended; a failed one leaves ``diff_dir`` absent."""

    exit_code: int | None
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


class StepRunner(Protocol):
    """Runs build commands in an isolated root and provides the host stand-in base."""

    async def run(self, command: BuildCommand) -> StepOutcome:
        """Run ``command``; on success write its diff to ``command.diff_dir``."""
        ...

    async def export(self, plan: RootfsPlan, paths: Sequence[str], scratch_dir: Path) -> bytes:
        """A tar of ``paths`` in ``plan``'s merged root (relative to ``/``; shell globs allowed), member
        names relative to ``/``, owners and modes as they are there; ImageBuildError if one is missing.

        ``copying.export_command(paths)`` is the shell line that writes it (run as root, cwd ``/``)."""
        ...

    async def host_base(self) -> RootfsPlan:
        """The mount plan of the host stand-in base (the host's system dirs, secrets masked)."""
        ...
