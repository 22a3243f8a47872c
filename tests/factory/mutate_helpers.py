"""Shared by the mutate tests: run ``candidates`` on one small module, and real git for diffs."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

from ares.factory.mutate import Mutation, candidates


def mutants(tmp_path: Path, source: str, strategy: str) -> list[Mutation]:
    """Every ``strategy`` mutation of ``source`` written as ``pkg/mod.py`` under ``tmp_path``."""
    (tmp_path / "pkg").mkdir(exist_ok=True)
    (tmp_path / "pkg" / "mod.py").write_text(textwrap.dedent(source))
    return list(candidates(tmp_path, ["pkg"], strategies=[strategy]))


def afters(tmp_path: Path, source: str, strategy: str) -> list[str]:
    return [m.after for m in mutants(tmp_path, source, strategy)]


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=check, capture_output=True, text=True)


def git_apply(cwd: Path, patch: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``git apply ARGS -`` with ``patch`` on stdin (not checked: callers assert on it)."""
    return subprocess.run(["git", "apply", *args, "-"], cwd=cwd, input=patch, text=True, capture_output=True)
