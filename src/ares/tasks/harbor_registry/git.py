"""``git`` as a subprocess whose result depends only on the repository and the pinned commit.

The user's and the system's git config are not read (they can name filters, hooks, fsmonitor
commands or URL rewrites), no ``GIT_*`` variable of the caller is passed on (``GIT_DIR`` and friends
would redirect it), hooks are off, templates are empty, only transports that run no command are
allowed (``GIT_ALLOW_PROTOCOL``), and git never asks for a password: it fails instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from ares.tasks.harbor_registry.model import LOCAL_SCHEMES, NETWORK_SCHEMES, DatasetError

#: ``-c`` settings of every call (they win over the repository's own config).
_CONFIG = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.symlinks=true",
    "protocol.allow=never",
    *(f"protocol.{scheme}.allow=always" for scheme in NETWORK_SCHEMES + LOCAL_SCHEMES),
    "advice.detachedHead=false",
    "gc.auto=0",
    "maintenance.auto=false",
    "init.defaultBranch=main",
)


class GitError(DatasetError):
    """A git command failed (the message has its last lines of output)."""


def git_env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_ALLOW_PROTOCOL=":".join(NETWORK_SCHEMES + LOCAL_SCHEMES),
        GIT_TERMINAL_PROMPT="0",
        GIT_ASKPASS="true",  # an empty answer: a repository that needs credentials fails at once
        GIT_SSH_COMMAND="ssh -o BatchMode=yes",
        GIT_HTTP_LOW_SPEED_LIMIT="1000",  # bytes/s; below it for 60 s the transfer is abandoned
        GIT_HTTP_LOW_SPEED_TIME="60",
        GIT_LFS_SKIP_SMUDGE="1",
        LC_ALL="C",
    )
    return env


def git_executable() -> str:
    found = shutil.which("git")
    if found is None:
        raise DatasetError("datasets by name need git, which is not on PATH; install git")
    return found


def run_git(repo: Path, *args: str, timeout_s: float | None = None) -> str:
    """Run ``git args`` in ``repo``; its stdout, or ``GitError`` with the command and its last output."""
    settings = [part for setting in _CONFIG for part in ("-c", setting)]
    command = [git_executable(), *settings, *args]
    try:
        done = subprocess.run(
            command, cwd=repo, env=git_env(), capture_output=True, text=True, errors="replace",
            stdin=subprocess.DEVNULL, timeout=timeout_s, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise GitError(f"git {args[0]} took longer than {timeout_s:g} s") from None
    if done.returncode != 0:
        lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        detail = " / ".join(lines[-3:]) or f"exit code {done.returncode}"
        raise GitError(f"git {args[0]} failed: {detail}")
    return done.stdout
