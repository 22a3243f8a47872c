"""Validated bugs written as SWE-bench-format instances the SWE loader runs unchanged.

Each instance gets a base commit of its own in the project's repository: a *root* commit (no parent,
so the history the agent sees is the buggy base and nothing else) of the pristine tree with the bug
applied and, when the tests are hidden (the default, SWE-bench style), without the test files that hold
its FAIL_TO_PASS tests. Those files come back in the ``test_patch``; the ``patch`` (the gold fix) is
the bug's reverse. The commit is made with git plumbing on a throwaway index, never in a work tree,
and published as ``refs/heads/<instance_id>`` so that the project image (built from a bundle of the
repository) carries every base; the SWE environment's hygiene step cuts an instance's image down to its
own base.

Rows are in the SWE-bench 5.x shape (``image``, ``eval_script``, ``log_parser`` per row) plus a
``synth`` object of training metadata (strategy, difficulty signals, project, licence). The instance id
is derived from the fix's diff, so the same bug always gets the same id.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ares.errors import TaskError
from ares.tasks.swe.eval_script import make_eval_script

#: Author, committer and date of every synthesized commit: the same bug gives the same base_commit.
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "ARES synth",
    "GIT_AUTHOR_EMAIL": "synth@ares.invalid",
    "GIT_COMMITTER_NAME": "ARES synth",
    "GIT_COMMITTER_EMAIL": "synth@ares.invalid",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00+0000",
}
TEST_CMD = "python -m pytest -rA -p no:cacheprovider"


class Bug(Protocol):
    """What an instance needs of a validated bug (``mutate.Mutation`` has it)."""

    strategy: str
    path: str
    qualname: str
    description: str
    after: str
    author: str | None


class Outcome(Protocol):
    """What an instance needs of the bug's validation run."""

    fail_to_pass: Sequence[str]
    pass_to_pass: Sequence[str]


@dataclass(frozen=True)
class BaseCommit:
    """An instance's buggy base and the two diffs against it."""

    commit: str
    patch: str
    test_patch: str
    hidden_tests: tuple[str, ...]


def instance_id(project: str, fix: str) -> str:
    """``synth__<project>-<10 hex>``: stable for a given fix diff, distinct across bugs."""
    return f"synth__{project}-{hashlib.sha256(fix.encode()).hexdigest()[:10]}"


def hidden_test_files(fail_to_pass: Sequence[str]) -> tuple[str, ...]:
    """The test files that hold the FAIL_TO_PASS tests (hidden until grading)."""
    return tuple(sorted({test.split("::", 1)[0] for test in fail_to_pass}))


def commit_base(
    repo: Path, pristine: str, bug: Bug, hide: Sequence[str], ref: str | None = None
) -> BaseCommit:
    """Make the bug's root commit in ``repo`` (pristine tree + bug - ``hide``); publish it as ``ref``."""
    with tempfile.TemporaryDirectory(prefix="ares-synth-index-") as scratch:
        env = {**os.environ, **GIT_IDENTITY, "GIT_INDEX_FILE": str(Path(scratch) / "index")}
        git = _Git(repo, env)
        git("read-tree", pristine)
        blob = git("hash-object", "-w", "--stdin", stdin=bug.after).strip()
        listed = git("ls-tree", pristine, "--", bug.path)  # "<mode> blob <sha>\t<path>", or "" for a new file
        mode = listed.split(" ", 1)[0] if listed else "100644"
        git("update-index", "--cacheinfo", f"{mode},{blob},{bug.path}")
        if hide:
            git("rm", "-q", "--cached", "--", *hide)
        tree = git("write-tree").strip()
        commit = git("commit-tree", tree, "-m", f"{bug.strategy} in {bug.qualname}").strip()
        if ref is not None:
            git("update-ref", f"refs/heads/{ref}", commit)
        patch = git("diff", "--no-color", "--no-ext-diff", "--binary", commit, pristine, "--", bug.path)
        test_patch = git("diff", "--no-color", "--no-ext-diff", commit, pristine, "--", *hide) if hide else ""
    if not patch.strip():
        raise TaskError(f"{bug.path}: the bug changes nothing in {pristine[:12]}")
    return BaseCommit(commit, patch, test_patch, tuple(hide))


def publish_ref(repo: Path, name: str, commit: str) -> None:
    """``refs/heads/<name>`` -> ``commit``, so a bundle of the repository carries the base."""
    _Git(repo, {**os.environ, **GIT_IDENTITY})("update-ref", f"refs/heads/{name}", commit)


def instance_row(
    *,
    project: Mapping[str, str],
    bug: Bug,
    outcome: Outcome,
    base: BaseCommit,
    image: str,
    test_paths: Sequence[str],
    statement: str,
    tests_visible: bool,
    writer: str = "template",
) -> dict[str, Any]:
    """One SWE-bench-5.x-shaped row (see the module docstring); ``project`` has name, version,
    licence, repo and pristine (the environment_setup_commit). ``synth.policy`` is the policy that
    wrote the bug (None for procedural ones), ``synth.statement_writer`` "template" or the policy
    that wrote the statement."""
    changed = [
        line for line in base.patch.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")
    ]
    row_id = instance_id(project["name"], base.patch)
    return {
        "instance_id": row_id,
        "repo": project.get("repo") or f"synth/{project['name']}",
        "base_commit": base.commit,
        "patch": base.patch,
        "test_patch": base.test_patch,
        "problem_statement": statement,
        "hints_text": "",
        "created_at": "2026-01-01T00:00:00Z",
        "version": project["version"],
        "environment_setup_commit": project["pristine"],
        "FAIL_TO_PASS": json.dumps(sorted(outcome.fail_to_pass)),
        "PASS_TO_PASS": json.dumps(sorted(outcome.pass_to_pass)),
        "image": image,
        "eval_script": make_eval_script(
            base.commit, base.test_patch, test_cmd=TEST_CMD, test_files=list(test_paths)
        ),
        "log_parser": "pytest",
        "synth": {
            "strategy": bug.strategy,
            "qualname": bug.qualname,
            "description": bug.description,
            "lines_changed": len(changed),
            "files": 1,
            "fail_to_pass": len(outcome.fail_to_pass),
            "pass_to_pass": len(outcome.pass_to_pass),
            "project": project["name"],
            "project_version": project["version"],
            "licence": project.get("licence", ""),
            "tests_visible": tests_visible,
            "hidden_tests": list(base.hidden_tests),
            "policy": bug.author,
            "statement_writer": writer,
        },
    }


def write_instances(rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """``instances.jsonl`` sorted by id, written atomically."""
    ordered = sorted(rows, key=lambda row: str(row["instance_id"]))
    scratch = path.with_name(f".{path.name}.{os.getpid()}")
    scratch.write_text("".join(json.dumps(row, sort_keys=True) + "\n" for row in ordered))
    os.replace(scratch, path)
    return path


class _Git:
    def __init__(self, repo: Path, env: Mapping[str, str]) -> None:
        self.repo, self.env = repo, dict(env)

    def __call__(self, *args: str, stdin: str | None = None) -> str:
        command = ["git", "-c", "core.hooksPath=/dev/null", "-c", "core.autocrlf=false", *args]
        done = subprocess.run(
            command, cwd=self.repo, env=self.env, input=stdin, capture_output=True, text=True
        )
        if done.returncode:
            raise TaskError(f"git {' '.join(args[:2])} in {self.repo} failed: {done.stderr.strip()}")
        return done.stdout
