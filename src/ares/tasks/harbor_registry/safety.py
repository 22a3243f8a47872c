"""What a checked-out task directory may contain before ARES uses it.

Task files are copied into sandboxes and used as build contexts, so a symlink that points out of
its task would hand a host file (``/etc/shadow``, ``~/.ssh``) to the agent: every link must resolve
inside its own task directory, and the path to the task may not pass through a link. A Git LFS
pointer where a file should be means the task cannot work (LFS files are not fetched): refused too.
"""

from __future__ import annotations

import os
from pathlib import Path

from ares.tasks.harbor_registry.model import DatasetError

_LFS_POINTER = b"version https://git-lfs.github.com/spec/"
_LFS_POINTER_MAX = 1024  # pointer files are about 130 bytes


def check_task_tree(tree: Path, path: str, where: str) -> Path:
    """The task directory ``tree/path``, checked: a real directory (reached without links) whose
    links stay inside it and that holds no LFS pointers."""
    task_dir = tree
    for part in () if path == "." else path.split("/"):
        task_dir = task_dir / part
        if task_dir.is_symlink():
            raise DatasetError(f"{where}: path {path!r} goes through the symlink {part!r}")
        if not task_dir.is_dir():
            raise DatasetError(f"{where}: path {path!r} is not a directory of the repository at that commit")
    root = os.path.realpath(task_dir)
    for current, dirs, files in os.walk(task_dir):
        for name in dirs + files:
            entry = Path(current, name)
            if entry.is_symlink():
                _check_link(entry, root, task_dir, where)
            elif name in files and entry.is_file():
                _check_not_lfs(entry, task_dir, where)
    return task_dir


def _check_link(link: Path, root: str, task_dir: Path, where: str) -> None:
    target = os.readlink(link)
    resolved = os.path.realpath(link)
    if os.path.isabs(target) or os.path.commonpath([root, resolved]) != root:
        raise DatasetError(
            f"{where}: {link.relative_to(task_dir)} is a symlink to {target!r}, outside the task "
            "directory; task links must point inside their task"
        )


def _check_not_lfs(file: Path, task_dir: Path, where: str) -> None:
    if file.stat().st_size > _LFS_POINTER_MAX:
        return
    with file.open("rb") as handle:
        if handle.read(len(_LFS_POINTER)) == _LFS_POINTER:
            raise DatasetError(
                f"{where}: {file.relative_to(task_dir)} is a Git LFS pointer; LFS files are not "
                "fetched, so this task cannot run (download it with git-lfs and use --path DIR)"
            )
