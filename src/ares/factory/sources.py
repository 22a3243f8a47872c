"""SOURCE -> a plain tree of the project's files: a git repository's HEAD tree (never its history), a
directory, an sdist (extracted safely: no member may land outside the tree), or a PyPI requirement
(downloaded as an sdist by ``pip download`` in a subprocess, so pip's own configuration and mirrors apply).
"""

from __future__ import annotations

import asyncio
import re
import shutil
import stat
import sys
import tarfile
import zipfile
from pathlib import Path, PurePosixPath

from ares.errors import TaskError
from ares.factory._proc import git, run

SDIST_SUFFIXES = (".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".tar", ".zip")
#: Never part of a project's source: VCS data, caches, virtualenvs, and build outputs (dist/ may hold the
#: project's own sdist or wheel, which must not reach the image).
SKIP_DIRS = frozenset(
    {".git", ".hg", ".svn", ".tox", ".nox", ".venv", "venv", "__pycache__", ".pytest_cache"}
)
SKIP_TOP = frozenset({"dist", "build", ".mypy_cache", ".ruff_cache", ".eggs"})
_REQUIREMENT = re.compile(
    r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._,\s-]*\])?\s*((===?|~=|!=|<=?|>=?)\s*[^\s;]+)?$"
)


async def materialise(source: str, dest: Path) -> None:
    """Fill the empty dir ``dest`` with SOURCE's files (its top level is the project root)."""
    path, kind = await asyncio.to_thread(_kind, source)
    if kind == "dir":
        if await _is_git(path):
            await _git_head_tree(path, dest)
        else:
            await asyncio.to_thread(_copy_dir, path, dest)
    elif kind == "file":
        if not source.endswith(SDIST_SUFFIXES):
            raise TaskError(f"{source}: not an sdist (expected one of {', '.join(SDIST_SUFFIXES)})")
        await asyncio.to_thread(extract_sdist, path, dest)
    elif _REQUIREMENT.match(source.strip()):
        archive = await download_sdist(source.strip(), dest.parent / (dest.name + ".download"))
        await asyncio.to_thread(extract_sdist, archive, dest)
    else:
        raise TaskError(f"{source}: no such file or directory, and not a PyPI requirement (name==version)")


def _kind(source: str) -> tuple[Path, str]:
    path = Path(source).expanduser()
    return path, "dir" if path.is_dir() else "file" if path.exists() else "missing"


def _looks_git(path: Path) -> bool:
    return (path / ".git").exists() or ((path / "HEAD").is_file() and (path / "objects").is_dir())


async def _is_git(path: Path) -> bool:
    """A work tree's top or a bare repository (a subdirectory of a work tree is a plain directory)."""
    if not await asyncio.to_thread(_looks_git, path):
        return False
    try:
        await git(path, "rev-parse", "--verify", "-q", "HEAD^{tree}")
    except TaskError as exc:
        raise TaskError(f"{path}: a git repository without a commit (nothing at HEAD)") from exc
    return True


async def _git_head_tree(repo: Path, dest: Path) -> None:
    """Check HEAD's tree out into ``dest`` through a private index (the repository is not touched)."""
    dest = await asyncio.to_thread(dest.resolve)
    index = dest.parent / (dest.name + ".index")
    env = {"GIT_INDEX_FILE": str(index)}
    try:
        await git(repo, "read-tree", "HEAD", env=env)
        await git(repo, "checkout-index", "-a", f"--prefix={dest}/", env=env)
    finally:
        await asyncio.to_thread(index.unlink, missing_ok=True)


def _copy_dir(src: Path, dest: Path) -> None:
    def ignore(folder: str, names: list[str]) -> set[str]:
        top = Path(folder).resolve() == src.resolve()
        return {n for n in names if n in SKIP_DIRS or (top and n in SKIP_TOP) or n.endswith((".pyc", ".pyo"))}

    shutil.copytree(src, dest, symlinks=True, ignore=ignore, dirs_exist_ok=True)


def extract_sdist(archive: Path, dest: Path) -> None:
    """Extract ``archive`` into ``dest``, refusing members that would land (or point) outside it; an
    archive of one top directory (``name-version/``) is unwrapped."""
    tmp = dest.parent / (dest.name + ".extract")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        if archive.name.endswith(".zip"):
            _extract_zip(archive, tmp)
        else:
            try:
                with tarfile.open(archive) as tar:
                    tar.extractall(tmp, filter=_strict_data_filter)
            except tarfile.FilterError as exc:
                raise TaskError(f"{archive.name}: unsafe sdist member refused ({exc})") from exc
            except (tarfile.TarError, EOFError, OSError) as exc:
                raise TaskError(f"{archive.name}: not a readable sdist ({exc})") from exc
        entries = list(tmp.iterdir())
        top = entries[0] if len(entries) == 1 and entries[0].is_dir() and not entries[0].is_symlink() else tmp
        dest.mkdir(parents=True, exist_ok=True)
        for child in top.iterdir():
            shutil.move(str(child), dest / child.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _strict_data_filter(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    """tarfile's ``data`` filter, except that an absolute name is refused rather than made relative."""
    if member.name.startswith("/"):
        raise tarfile.AbsolutePathError(member)
    return tarfile.data_filter(member, dest)


def _extract_zip(archive: Path, dest: Path) -> None:
    try:
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                name = PurePosixPath(info.filename)
                if name.is_absolute() or ".." in name.parts or ":" in info.filename.split("/")[0]:
                    raise TaskError(
                        f"{archive.name}: unsafe sdist member refused ({info.filename!r} leaves the tree)"
                    )
                if stat.S_ISLNK(info.external_attr >> 16):
                    raise TaskError(
                        f"{archive.name}: unsafe sdist member refused ({info.filename!r} is a link)"
                    )
            zf.extractall(dest)
    except zipfile.BadZipFile as exc:
        raise TaskError(f"{archive.name}: not a readable sdist ({exc})") from exc


async def download_sdist(requirement: str, dest: Path) -> Path:
    """``pip download --no-deps --no-binary :all: REQUIREMENT`` into ``dest``; the sdist it wrote."""
    await asyncio.to_thread(_fresh, dest)
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:"]
    done = await run([*cmd, requirement, "-d", str(dest)])
    found = await asyncio.to_thread(
        lambda: sorted(p for p in dest.iterdir() if p.name.endswith(SDIST_SUFFIXES))
    )
    if done.returncode != 0 or not found:
        errors = [ln.strip() for ln in done.stderr.splitlines() if ln.strip().startswith("ERROR")]
        detail = errors[-1] if errors else (done.stderr.strip().splitlines() or ["no sdist downloaded"])[-1]
        raise TaskError(
            f"pip could not download the sdist of {requirement} (offline or no such release?): {detail}"
        )
    return found[0]


def _fresh(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
