"""Real git repositories of Harbor tasks and registry files pointing at them, for the registry tests.

``task_repo`` copies fixture task dirs into a repository, commits them (the pinned commit), then
commits a broken version on top (the branch head): an oracle run scores 1 only on the pinned commit.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
#: The pinned version of each task says this in its instruction; the later commit says otherwise.
PINNED_MARK = "pinned version"
_ENV = {
    "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
}  # fmt: skip


def git(repo: Path, *args: str) -> str:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")}, **_ENV}
    done = subprocess.run(
        ["git", "-c", "init.defaultBranch=main", *args], cwd=repo, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, f"git {args}: {done.stderr}"
    return done.stdout.strip()


@dataclass(frozen=True)
class TaskRepo:
    path: Path
    pinned: str  # the commit the registry names
    head: str  # a later commit on the branch, with broken tasks

    @property
    def url(self) -> str:
        return self.path.as_uri()


def task_repo(root: Path, tasks: Mapping[str, str], extra: Mapping[str, str] | None = None) -> TaskRepo:
    """A repo holding fixture task ``tasks[path]`` (a dir under tests/fixtures/harbor) at each path, and
    the files ``extra`` (path: text), committed; then a commit that breaks every task's oracle."""
    root.mkdir(parents=True)
    git(root, "init", "-q")
    for path, fixture in tasks.items():
        shutil.copytree(FIXTURES / "harbor" / fixture, root / path)
        instruction = root / path / "instruction.md"
        instruction.write_text(instruction.read_text() + f"\n({PINNED_MARK})\n")
    for path, text in (extra or {}).items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "tasks")
    pinned = git(root, "rev-parse", "HEAD")
    for path in tasks:
        (root / path / "solution" / "solve.sh").write_text("#!/bin/sh\nexit 0\n")
        (root / path / "instruction.md").write_text("A later, broken version.\n")
    git(root, "commit", "-qam", "break the oracles")
    return TaskRepo(root, pinned, git(root, "rev-parse", "HEAD"))


def entry(name: str, url: str, commit: str | None, path: str) -> dict[str, Any]:
    return {"name": name, "git_url": url, "git_commit_id": commit, "path": path}


def dataset(name: str, version: str, tasks: list[dict[str, Any]], description: str = "") -> dict[str, Any]:
    return {"name": name, "version": version, "description": description, "tasks": tasks, "metrics": []}


def write_registry(path: Path, datasets: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps(datasets, indent=1))
    return path


@contextmanager
def http_served(directory: Path) -> Iterator[str]:
    """Serve ``directory`` over plain HTTP on loopback (a "dumb" git server: no fetch by commit id)."""
    handler = partial(_QuietHandler, directory=str(directory))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass
