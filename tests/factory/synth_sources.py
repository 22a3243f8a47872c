"""The fixture projects' sources as the source kinds the factory accepts: a plain directory, an sdist,
and a git repository with a later commit."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from pathlib import Path

BUNDLES = Path(__file__).parents[1] / "fixtures" / "swe" / "images"
PROJECTS = ("toolz", "tomlkit", "marshmallow", "boltons", "click")
GIT_ENV = {
    "GIT_AUTHOR_NAME": "dev",
    "GIT_AUTHOR_EMAIL": "dev@example.org",
    "GIT_COMMITTER_NAME": "dev",
    "GIT_COMMITTER_EMAIL": "dev@example.org",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV}
    return subprocess.run(
        ["git", "-C", str(repo), *args], env=env, check=True, capture_output=True, text=True
    ).stdout


def has_object(repo: Path, sha: str) -> bool:
    """Whether ``repo``'s object store holds ``sha``."""
    env = {**os.environ, **GIT_ENV}
    return (
        subprocess.run(["git", "-C", str(repo), "cat-file", "-e", sha], env=env, check=False).returncode == 0
    )


def plain_dir(clone: Path, dest: Path) -> Path:
    """The clone's files without its .git."""
    shutil.copytree(clone, dest, ignore=shutil.ignore_patterns(".git"))
    return dest


def make_sdist(clone: Path, dest_dir: Path, name: str, version: str) -> Path:
    """An sdist (``name-version/`` at the top, PKG-INFO included) of the clone's files."""
    assert (clone / "PKG-INFO").is_file()
    archive = dest_dir / f"{name}-{version}.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted(clone.rglob("*")):
            rel = path.relative_to(clone)
            if rel.parts[0] != ".git":
                tar.add(path, arcname=f"{name}-{version}/{rel.as_posix()}", recursive=False)
    return archive


def repo_with_later_commit(clone: Path, dest: Path) -> tuple[Path, str]:
    """A git repo of the clone plus a second commit (a 'future fix'); the future commit's sha."""
    git(clone.parent, "clone", "-q", str(clone), str(dest))
    (dest / "FUTURE.txt").write_text("the fix from the future\n")
    git(dest, "add", "FUTURE.txt")
    git(dest, "commit", "-q", "-m", "future fix")
    return dest, git(dest, "rev-parse", "HEAD").strip()
