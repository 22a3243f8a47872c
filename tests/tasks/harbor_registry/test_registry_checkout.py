"""Registry datasets fetched with real git from file:// and http:// repositories into the cache: the
pinned commit and nothing else, reused without the network, hostile trees refused, nothing half-written."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from harbor_repos import PINNED_MARK, TaskRepo, dataset, entry, git, http_served, task_repo, write_registry

from ares.tasks.harbor_registry import DatasetError, load_registry_dataset
from ares.tasks.harbor_registry.git import GitError, run_git
from ares.tasks.harbor_registry.safety import check_task_tree

TASKS = {"tasks/hello-file": "hello-file", "tasks/fix-bug": "fix-bug"}


@pytest.fixture
def repo(tmp_path: Path) -> TaskRepo:
    return task_repo(tmp_path / "repo", TASKS, extra={"unrelated/big.txt": "not a task\n"})


def _registry(tmp_path: Path, repo: TaskRepo, url: str | None = None, commit: str | None = None) -> Path:
    tasks = [
        entry("hello", url or repo.url, commit or repo.pinned, "tasks/hello-file"),
        entry("fix-bug", url or repo.url, commit or repo.pinned, "tasks/fix-bug"),
    ]
    return write_registry(tmp_path / "registry.json", [dataset("demo", "1.0", tasks, "two fixture tasks")])


def _entries(cache: Path) -> list[str]:
    return sorted(p.name for p in (cache / "datasets" / "git").iterdir())


def _staging(cache: Path) -> list[str]:
    return sorted(p.name for p in (cache / "datasets" / "tmp").iterdir())


def test_tasks_load_at_the_pinned_commit_with_registry_names(tmp_path: Path, repo: TaskRepo) -> None:
    cache = tmp_path / "cache"
    tasks = load_registry_dataset("demo@1.0", registry=_registry(tmp_path, repo), cache_dir=cache)
    assert [t.id for t in tasks] == ["hello", "fix-bug"]
    assert all(PINNED_MARK in t.instruction for t in tasks)  # not the branch head's broken version
    assert tasks[0].metadata["registry"] == {
        "dataset": "demo@1.0", "git_url": repo.url, "commit": repo.pinned, "path": "tasks/hello-file",
    }  # fmt: skip
    [key] = _entries(cache)
    tree = cache / "datasets" / "git" / key / "tree"
    assert key.startswith(f"repo-{repo.pinned[:12]}-")
    assert "set -euo pipefail" in (tree / "tasks/hello-file/solution/solve.sh").read_text()
    assert not (tree / "unrelated").exists()  # a sparse checkout: the task paths only
    assert not (tree / ".git").exists()
    assert tasks[0].tests == tree / "tasks/hello-file/tests"
    assert _staging(cache) == []


def test_a_server_that_filters_blobs_gives_a_partial_clone_of_the_task_paths(
    tmp_path: Path, repo: TaskRepo
) -> None:
    """With ``uploadpack.allowFilter`` the depth-1 fetch leaves blobs behind; checkout fetches those of
    the task paths."""
    git(repo.path, "config", "uploadpack.allowFilter", "true")
    cache = tmp_path / "cache"
    tasks = load_registry_dataset("demo", registry=_registry(tmp_path, repo), cache_dir=cache)
    assert all(PINNED_MARK in t.instruction for t in tasks)
    [key] = _entries(cache)
    assert sorted(p.name for p in (cache / "datasets" / "git" / key / "tree").iterdir()) == ["tasks"]


def test_a_cache_hit_needs_neither_the_repository_nor_git(
    tmp_path: Path, repo: TaskRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache, registry = tmp_path / "cache", _registry(tmp_path, repo)
    first = load_registry_dataset("demo", registry=registry, cache_dir=cache)
    shutil.rmtree(repo.path)
    monkeypatch.setenv("PATH", str(tmp_path / "no-git-here"))
    again = load_registry_dataset("demo@1.0", registry=registry, cache_dir=cache)
    assert [(t.id, t.instruction) for t in again] == [(t.id, t.instruction) for t in first]


def test_a_server_that_will_not_serve_commits_by_id_gets_a_full_fetch(tmp_path: Path, repo: TaskRepo) -> None:
    """A "dumb" HTTP server cannot do a shallow fetch by commit id: the fallback fetches the branches."""
    served = tmp_path / "www"
    served.mkdir()
    git(served, "clone", "-q", "--bare", str(repo.path), "repo.git")
    git(served / "repo.git", "update-server-info")
    cache = tmp_path / "cache"
    with http_served(served) as base:
        url = f"{base}/repo.git"
        registry = _registry(tmp_path, repo, url=url)
        tasks = load_registry_dataset("demo@1.0", registry=registry, cache_dir=cache)
    assert [t.metadata["registry"]["commit"] for t in tasks] == [repo.pinned] * 2
    assert all(PINNED_MARK in t.instruction for t in tasks)
    assert _staging(cache) == []


def test_a_commit_the_repository_does_not_have_is_an_error_and_leaves_nothing(
    tmp_path: Path, repo: TaskRepo
) -> None:
    cache, missing = tmp_path / "cache", "f" * 40
    with pytest.raises(DatasetError, match=f"commit {missing} is not in {repo.url}"):
        load_registry_dataset("demo", registry=_registry(tmp_path, repo, commit=missing), cache_dir=cache)
    assert not (cache / "datasets" / "git").exists()
    assert _staging(cache) == []


def test_a_path_missing_at_the_pinned_commit_is_an_error(tmp_path: Path, repo: TaskRepo) -> None:
    registry = write_registry(
        tmp_path / "r.json", [dataset("demo", "1.0", [entry("x", repo.url, repo.pinned, "tasks/nope")])]
    )
    with pytest.raises(DatasetError, match="path 'tasks/nope' is not a directory of the repository"):
        load_registry_dataset("demo", registry=registry, cache_dir=tmp_path / "cache")
    assert _staging(tmp_path / "cache") == []


@pytest.mark.parametrize(
    ("link", "target", "message"),
    [
        ("tests/passwd", "/etc/passwd", "is a symlink to '/etc/passwd', outside the task"),
        ("tests/up", "../../../unrelated", "is a symlink to '../../../unrelated', outside the task"),
        ("tests/sneaky", "../solution/../..", "outside the task"),
    ],
)
def test_symlinks_out_of_a_task_are_refused(tmp_path: Path, link: str, target: str, message: str) -> None:
    repo = task_repo(tmp_path / "repo", {"tasks/hello-file": "hello-file"})
    git(repo.path, "checkout", "-q", repo.pinned)
    os.symlink(target, repo.path / "tasks/hello-file" / link)
    git(repo.path, "add", "-A")
    git(repo.path, "commit", "-qm", "a link")
    pinned = git(repo.path, "rev-parse", "HEAD")
    registry = write_registry(
        tmp_path / "r.json", [dataset("demo", "1.0", [entry("hello", repo.url, pinned, "tasks/hello-file")])]
    )
    with pytest.raises(DatasetError, match=message):
        load_registry_dataset("demo", registry=registry, cache_dir=tmp_path / "cache")
    assert not (tmp_path / "cache" / "datasets" / "git").exists()


def test_links_inside_a_task_are_kept_and_a_linked_task_path_is_refused(tmp_path: Path) -> None:
    repo = task_repo(tmp_path / "repo", {"tasks/hello-file": "hello-file"})
    git(repo.path, "checkout", "-q", repo.pinned)
    os.symlink("../solution/solve.sh", repo.path / "tasks/hello-file/tests/solve-copy.sh")
    os.symlink("tasks", repo.path / "alias")
    git(repo.path, "add", "-A")
    git(repo.path, "commit", "-qm", "links")
    pinned = git(repo.path, "rev-parse", "HEAD")
    good = entry("hello", repo.url, pinned, "tasks/hello-file")
    registry = write_registry(tmp_path / "r.json", [dataset("demo", "1.0", [good])])
    [task] = load_registry_dataset("demo", registry=registry, cache_dir=tmp_path / "cache")
    assert (task.tests / "solve-copy.sh").is_symlink()
    linked = entry("hello", repo.url, pinned, "alias/hello-file")
    registry = write_registry(tmp_path / "r2.json", [dataset("demo", "1.0", [linked])])
    with pytest.raises(DatasetError, match="path 'alias/hello-file' is not a directory"):  # sparse: no link
        load_registry_dataset("demo", registry=registry, cache_dir=tmp_path / "cache")
    with pytest.raises(DatasetError, match="path 'alias/hello-file' goes through the symlink 'alias'"):
        check_task_tree(repo.path, "alias/hello-file", "a full checkout")


def test_git_lfs_pointers_are_refused(tmp_path: Path) -> None:
    pointer = "version https://git-lfs.github.com/spec/v1\noid sha256:" + "a" * 64 + "\nsize 12\n"
    repo = task_repo(tmp_path / "repo", {"t": "hello-file"}, extra={"t/environment/data.bin": pointer})
    only = dataset("d", "1", [entry("t", repo.url, repo.pinned, "t")])
    registry = write_registry(tmp_path / "r.json", [only])
    with pytest.raises(DatasetError, match=r"environment/data\.bin is a Git LFS pointer"):
        load_registry_dataset("d", registry=registry, cache_dir=tmp_path / "cache")


def test_the_users_git_config_hooks_and_git_variables_change_nothing(
    tmp_path: Path, repo: TaskRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A global config that rewrites URLs and runs hooks, and GIT_DIR pointing elsewhere, are ignored."""
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    marker = tmp_path / "hook-ran"
    for name in ("post-checkout", "reference-transaction", "fsmonitor-watchman"):
        (hooks / name).write_text(f"#!/bin/sh\ntouch {marker}\n")
        (hooks / name).chmod(0o755)
    config = tmp_path / "gitconfig"
    config.write_text(
        f"[core]\n\thooksPath = {hooks}\n\tfsmonitor = {hooks}/fsmonitor-watchman\n"
        f'[url "file:///nonexistent/"]\n\tinsteadOf = file://\n'
        "[protocol]\n\tallow = never\n"
    )
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'core.hookspath'='/tmp'")
    tasks = load_registry_dataset("demo", registry=_registry(tmp_path, repo), cache_dir=tmp_path / "cache")
    assert [t.id for t in tasks] == ["hello", "fix-bug"]
    assert not marker.exists()
    assert not (tmp_path / "elsewhere").exists()


def test_git_itself_refuses_command_running_transports(tmp_path: Path) -> None:
    """The registry check refuses ``ext::`` first; git's own allow-list is the second wall."""
    marker = tmp_path / "pwned"
    run_git(tmp_path, "init", "-q", "--template=", ".")
    with pytest.raises(GitError, match="transport 'ext' not allowed"):
        run_git(tmp_path, "fetch", f"ext::sh -c touch% {marker}", "main")
    assert not marker.exists()


def test_concurrent_loads_fetch_once_and_agree(tmp_path: Path, repo: TaskRepo) -> None:
    cache, registry = tmp_path / "cache", _registry(tmp_path, repo)
    script = (
        "import sys; from pathlib import Path; from ares.tasks.harbor_registry import load_registry_dataset;"
        "ts = load_registry_dataset('demo@1.0', registry=sys.argv[1], cache_dir=Path(sys.argv[2]));"
        "print(' '.join(str(t.tests) for t in ts))"
    )
    command = [sys.executable, "-c", script, str(registry), str(cache)]
    procs = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in range(4)]
    outputs = {proc.communicate(timeout=120)[0] for proc in procs}
    assert [proc.returncode for proc in procs] == [0] * 4
    assert len(outputs) == 1 and len(_entries(cache)) == 1
    assert _staging(cache) == []
