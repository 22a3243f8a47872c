"""This process's scratch space for local sandboxes: the host base layers and per-sandbox dirs."""

from __future__ import annotations

import asyncio
import atexit
import os
import secrets
import threading
from collections.abc import Callable
from pathlib import Path

from ares.images.rootfs import RootfsPlan
from ares.sandbox.local import janitor
from ares.sandbox.local.rootfs import build_host_base

_lock = threading.Lock()
_process_dir: Path | None = None
_host_plan: RootfsPlan | None = None


def process_dir() -> Path:
    """``<state root>/<pid>-<token>``, created once per process and removed at exit."""
    global _process_dir
    with _lock:
        if _process_dir is None or _process_dir.name.split("-")[0] != str(os.getpid()):
            root = janitor.state_root()
            janitor.sweep_stale(root)
            path = root / f"{os.getpid()}-{secrets.token_hex(4)}"
            path.mkdir(mode=0o711)
            (path / "sandboxes").mkdir()
            _process_dir = path
            atexit.register(janitor.remove_tree, path)
        return _process_dir


def host_base_plan() -> RootfsPlan:
    """The host base image, built on first use (a few milliseconds: it only lists /etc)."""
    global _host_plan
    base = process_dir()
    with _lock:
        if _host_plan is None:
            _host_plan = build_host_base(base / "host-base")
        return _host_plan


async def host_base_plan_async() -> RootfsPlan:
    if _host_plan is not None and _process_dir is not None:
        return _host_plan
    return await asyncio.to_thread(host_base_plan)


def new_sandbox_dir(
    plan: RootfsPlan, parent: Path | None = None, prepare: Callable[[Path], None] | None = None
) -> Path:
    """A fresh dir with empty upper/work dirs for each mount of ``plan`` and a mount point.

    ``prepare`` runs on the still empty dir (the disk limit mounts its tmpfs there).
    """
    path = (parent or process_dir() / "sandboxes") / secrets.token_hex(6)
    path.mkdir(mode=0o711)
    if prepare is not None:
        try:
            prepare(path)
        except BaseException:
            path.rmdir()
            raise
    for sub in ("upper", "work"):
        (path / sub).mkdir()
        for mount in plan.mounts:
            (path / sub / mount.key).mkdir()
    (path / "root").mkdir()
    (path / "stage").mkdir()
    return path
