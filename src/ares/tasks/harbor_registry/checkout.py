"""A repository's task directories at a pinned commit, in the cache: fetched once, then reused.

Layout under ``<ARES cache>/datasets/``::

    git/<repo>-<commit12>-<digest>/tree/          the repository's files at the commit (no .git)
    git/<repo>-<commit12>-<digest>/source.json    URL, commit and paths it was made from
    locks/<key>.lock, tmp/<pid>-<key>-*/          cross-process locks and staging dirs

An entry is keyed by URL, commit and the set of task paths (a sparse checkout holds only those), is
built in a staging dir and published with one ``rename``, and is never changed afterwards: a run
reading it is never disturbed, a failed fetch leaves nothing behind, and a published entry is used
without touching the network. A per-entry ``flock`` makes concurrent runs fetch it once.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import secrets
from collections.abc import Iterator, Sequence
from pathlib import Path

from ares.core.rmtree import remove_tree
from ares.images.scratch import sweep_dead
from ares.tasks.harbor_registry.git import GitError, run_git
from ares.tasks.harbor_registry.model import DatasetError
from ares.tasks.harbor_registry.safety import check_task_tree

_SLUG = re.compile(r"[^A-Za-z0-9._-]+")


def checkout(cache: Path, git_url: str, commit: str, paths: Sequence[str]) -> Path:
    """The files of ``git_url`` at ``commit`` (at least ``paths``, each checked), from the cache or
    fetched into it."""
    wanted = sorted(set(paths))
    key = entry_key(git_url, commit, wanted)
    entry = cache / "git" / key
    if _published(entry, git_url, commit, wanted):
        return entry / "tree"
    with _locked(cache / "locks" / f"{key}.lock"):
        if _published(entry, git_url, commit, wanted):  # another process fetched it meanwhile
            return entry / "tree"
        sweep_dead(_mkdir(cache / "tmp"))
        staging = cache / "tmp" / f"{os.getpid()}-{key}-{secrets.token_hex(4)}"
        try:
            _build(staging, git_url, commit, wanted)
            _mkdir(cache / "git")
            os.rename(staging, entry)
        finally:
            if os.path.lexists(staging):
                remove_tree(staging)
    return entry / "tree"


def entry_key(git_url: str, commit: str, paths: Sequence[str]) -> str:
    """``<repo name>-<commit[:12]>-<digest of URL, commit and paths>``: readable and unique."""
    name = git_url.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1].removesuffix(".git")
    slug = _SLUG.sub("_", name).strip("._-")[:40] or "repo"
    digest = hashlib.sha256("\0".join([git_url, commit, *paths]).encode()).hexdigest()[:12]
    return f"{slug}-{commit[:12]}-{digest}"


def _published(entry: Path, git_url: str, commit: str, paths: list[str]) -> bool:
    try:
        source = json.loads((entry / "source.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return False
    except (OSError, ValueError) as exc:
        raise DatasetError(f"the dataset cache entry {entry} is unreadable ({exc}); delete it") from None
    if source != {"git_url": git_url, "commit": commit, "paths": paths} or not (entry / "tree").is_dir():
        raise DatasetError(
            f"the dataset cache entry {entry} is not the one for {git_url}@{commit}; delete it"
        )
    return True


def _build(staging: Path, git_url: str, commit: str, paths: list[str]) -> None:
    """Fetch and check out into ``staging/tree``: by commit id with depth 1 (sparse when possible),
    else (a server that refuses to serve a commit by id, or lazy blobs it cannot serve) a full fetch
    of its branches and tags. Then check the commit and the task dirs and drop ``.git``."""
    tree = staging / "tree"
    try:
        _fetch_and_check_out(tree, git_url, commit, paths, shallow=True)
    except GitError as shallow:
        remove_tree(tree)
        try:
            _fetch_and_check_out(tree, git_url, commit, paths, shallow=False)
        except GitError as full:
            same = str(full) == str(shallow)
            also = "(a full fetch failed the same way)" if same else f"; a full fetch failed too: {full}"
            raise DatasetError(f"cannot fetch {git_url} at {commit}: {shallow} {also}") from None
    head = run_git(tree, "rev-parse", "--verify", "HEAD^{commit}").strip()
    if head != commit:
        raise DatasetError(f"{git_url}: checked out {head}, not the pinned commit {commit}")
    for path in paths:
        check_task_tree(tree, path, f"{git_url}@{commit[:12]}")
    remove_tree(tree / ".git")
    (staging / "source.json").write_text(
        json.dumps({"git_url": git_url, "commit": commit, "paths": paths}, indent=1), encoding="utf-8"
    )


def _fetch_and_check_out(tree: Path, git_url: str, commit: str, paths: list[str], *, shallow: bool) -> None:
    _mkdir(tree)
    run_git(tree, "init", "--quiet", "--template=", ".")
    run_git(tree, "remote", "add", "origin", "--", git_url)
    sparse = "." not in paths
    if sparse:
        run_git(tree, "sparse-checkout", "set", "--no-cone", *(f"/{path}/" for path in paths))
    if shallow:
        lazy = ("--filter=blob:none",) if sparse else ()
        run_git(tree, "fetch", "--quiet", "--no-tags", "--depth=1", *lazy, "origin", commit)
    else:
        run_git(tree, "fetch", "--quiet", "--tags", "origin", "+refs/heads/*:refs/remotes/origin/*")
        try:
            run_git(tree, "cat-file", "-e", f"{commit}^{{commit}}")
        except GitError:
            raise DatasetError(
                f"commit {commit} is not in {git_url} (not on any branch or tag); check the registry's "
                "git_commit_id"
            ) from None
    run_git(tree, "checkout", "--quiet", "--detach", commit)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Held by one process at a time (flock); released when the file is closed, even on a crash."""
    _mkdir(path.parent)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path
