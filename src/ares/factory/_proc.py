"""Subprocesses of the factory (git, pip) without blocking the event loop."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ares.errors import TaskError

#: git with no user or system configuration: hooks, signing or autocrlf must not change the commit.
GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0"}
GIT_OPTS = ("-c", "core.autocrlf=false", "-c", "core.filemode=true", "-c", "commit.gpgsign=false")


@dataclass(frozen=True)
class Completed:
    """A finished subprocess."""

    returncode: int
    stdout: str
    stderr: str


async def run(
    cmd: Sequence[str], *, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> Completed:
    """Run ``cmd`` to completion (``env`` is added to ours); a missing program is a TaskError."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *cmd,
            cwd=cwd,
            env={**os.environ, **(env or {})},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except FileNotFoundError as exc:
        raise TaskError(f"{cmd[0]} is not installed (needed to prepare the project)") from exc
    stdout, stderr = await proc.communicate()
    return Completed(
        proc.returncode or 0, (stdout or b"").decode(errors="replace"), stderr.decode(errors="replace")
    )


async def git(repo: Path, *args: str, env: Mapping[str, str] | None = None) -> str:
    """``git -C repo ARGS`` with the configuration pinned; its stdout, or a TaskError with its stderr."""
    done = await run(["git", *GIT_OPTS, "-C", str(repo), *args], env={**GIT_ENV, **(env or {})})
    if done.returncode != 0:
        detail = done.stderr.strip().splitlines()
        raise TaskError(f"git {args[0]} failed in {repo}: {detail[-1] if detail else done.returncode}")
    return done.stdout
