"""Process-wide bookkeeping so no sandbox outlives the interpreter.

Every running sandbox registers its host pids and state dir here. At interpreter exit (atexit,
SIGTERM, SIGINT via KeyboardInterrupt) they are killed, their limits released (cgroups removed, disk
tmpfs unmounted) and their dirs removed. Dirs, mounts and cgroups left by a process that died
without cleanup (SIGKILL) are swept the next time a process starts a sandbox. The dirs hold what
the agent wrote, so removing them never follows a symlink (see ``rmtree``).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import select
import signal
import stat
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from ares.core.rmtree import remove_tree
from ares.errors import SandboxError
from ares.sandbox.local import cgroups, limits

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_live: dict[str, tuple[list[int], Path | None, Callable[[], None] | None]] = {}
_installed = False
_signal_installed = False


def state_root() -> Path:
    """Where sandboxes of this user keep their layers: ``$TMPDIR/ares-<uid>`` or ``$ARES_SANDBOX_DIR``.

    Root's sandboxes live there, so a dir someone else created (or a symlink they planted) under that
    name in a shared /tmp is refused rather than used.
    """
    override = os.environ.get("ARES_SANDBOX_DIR")
    root = Path(os.path.abspath(override or Path(tempfile.gettempdir()) / f"ares-{os.getuid()}"))
    root.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.mkdir(root, 0o700)
    problem = _not_private(root)
    if problem is not None:
        raise SandboxError(
            f"refusing to use {root} as the sandbox state dir: {problem}. Remove it if it is yours, or "
            "set ARES_SANDBOX_DIR to a directory of your own that no one else can write to (mode 0700)"
        )
    return root


def _not_private(path: Path) -> str | None:
    """Why ``path`` is not a dir only this user controls, or None if it is."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return "it is a symlink"
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a directory"
    if st.st_uid != os.geteuid():
        return f"it is owned by uid {st.st_uid}, not by this user (uid {os.geteuid()})"
    if st.st_mode & 0o022:
        return f"it is writable by its group or by others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def sweep_stale(root: Path) -> list[str]:
    """Remove process dirs (named ``<pid>-...``) whose process no longer exists, and stale ARES cgroups.

    Entries are never followed: a symlink is removed as a link. One entry that cannot be removed does
    not stop the others; what was left is logged and returned.
    """
    failures: list[str] = []
    try:
        with os.scandir(root) as it:
            entries = [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in it]
    except OSError as exc:
        entries = []
        failures.append(f"{root}: {exc.strerror or exc}")
    for name, is_dir in entries:
        pid_text = name.split("-", 1)[0]
        if not pid_text.isdigit() or int(pid_text) == os.getpid() or cgroups.process_alive(int(pid_text)):
            continue
        path = root / name
        try:
            if is_dir:
                limits.unmount_under(path)
            failures += remove_tree(path)
        except OSError as exc:
            failures.append(f"{path}: {exc.strerror or exc}")
    try:
        cgroups.sweep_stale()
    except OSError as exc:
        logger.warning("cannot sweep stale sandbox cgroups: %s", exc)
    return failures


def register(
    sandbox_id: str, pids: list[int], path: Path | None, release: Callable[[], None] | None = None
) -> None:
    """``release`` undoes the sandbox's limits once its processes are dead, before its dir (if any) goes."""
    _install_handlers()
    with _lock:
        _live[sandbox_id] = (pids, path, release)


def unregister(sandbox_id: str) -> None:
    with _lock:
        _live.pop(sandbox_id, None)


def kill_all() -> None:
    """Synchronously kill every registered sandbox and delete its files."""
    with _lock:
        items = list(_live.values())
        _live.clear()
    for pids, path, release in items:
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        for pid in pids:
            _wait_gone(pid)
        if release is not None:
            with contextlib.suppress(Exception):
                release()
        if path is not None:
            remove_tree(path)


def _wait_gone(pid: int, timeout_s: float = 5.0) -> None:
    """Reap ``pid`` if it is our child; otherwise (an init forked by the zygote, a pid 1) wait, bounded,
    until it has exited, so its files are no longer in use when they are removed."""
    try:
        os.waitpid(pid, 0)
        return
    except ChildProcessError:
        pass
    except OSError:
        return
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return  # already gone
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        poller.poll(timeout_s * 1000)
    finally:
        os.close(pidfd)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    kill_all()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _install_handlers() -> None:
    """atexit once; the SIGTERM handler once a registration comes from the main thread (a first one
    from another thread, e.g. ``prelaunch``'s, must not leave SIGTERM without it)."""
    global _installed, _signal_installed
    if not _installed:
        _installed = True
        atexit.register(kill_all)
    if _signal_installed or threading.current_thread() is not threading.main_thread():
        return
    _signal_installed = True
    with contextlib.suppress(ValueError):
        if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
            signal.signal(signal.SIGTERM, _on_sigterm)
