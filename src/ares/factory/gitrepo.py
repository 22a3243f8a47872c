"""The project's repository: one root commit of the pristine tree with a fixed author, committer,
date and message, so the same release always gets the same ``base_commit`` and no history leaks."""

from __future__ import annotations

from pathlib import Path

from ares.factory._proc import git

AUTHOR = "ARES synth"
EMAIL = "synth@ares.invalid"
DATE = "2026-01-01T00:00:00+0000"
BRANCH = "main"


async def commit_tree(root: Path, message: str) -> str:
    """``git init`` ``root`` and commit everything in it (ignored files too: an sdist's generated files,
    e.g. ``_version.py``, are part of the release); the commit's sha."""
    env = {
        "GIT_AUTHOR_NAME": AUTHOR,
        "GIT_AUTHOR_EMAIL": EMAIL,
        "GIT_AUTHOR_DATE": DATE,
        "GIT_COMMITTER_NAME": AUTHOR,
        "GIT_COMMITTER_EMAIL": EMAIL,
        "GIT_COMMITTER_DATE": DATE,
    }
    await git(root, "init", "-q", "-b", BRANCH)
    await git(root, "add", "-A", "-f", ".")
    await git(root, "commit", "-q", "--no-verify", "--allow-empty", "-m", message, env=env)
    return (await git(root, "rev-parse", "HEAD")).strip()
