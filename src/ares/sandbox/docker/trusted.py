"""The trusted shell of a docker verifier fork in ``full`` mode, where the container is a commit of
the agent's: no program of that filesystem may run before ``test.sh`` starts or while its result is
collected (an agent that replaced /bin/sh, bash, ``timeout``, ``cat``... or wrote
/etc/ld.so.preload would otherwise forge its reward).

The image's own bash, its loader and libraries are captured once per engine and image id from a
pristine container (:func:`image_shell`). Before the fork's container starts, the archive API puts
them flat (no symlinks, mode 0555) at a fresh random top-level dir, replaces the tests' dirs by
empty ones and an existing /etc by one whose ld.so.preload is an empty regular file (the engines
resolve archive paths inside the container's root, so a symlinked /etc or ld.so.preload cannot
redirect the write outside it). pid 1, the exec wrapper (``execution.TRUSTED_WRAPPER``), the
command and the timeout sweeper are then all started through that bundle's loader, with builtins
only in between.
"""

from __future__ import annotations

import io
import logging
import posixpath
import secrets
import tarfile
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

import docker
import docker.errors

from ares.sandbox.base import Sandbox
from ares.sandbox.docker.client import api_message
from ares.sandbox.docker.outputs import stat_path
from ares.sandbox.trusted_shell import ShellBundle, capture_shell

__all__ = ["TRUSTED_PID1", "TrustedShell", "image_shell", "prepare", "seed_archive", "seeded_paths"]

#: pid 1 of a trusted fork, run by the bundle's bash. A subshell sleeps with ``read -t`` on a pipe
#: that never gets data (no ``sleep`` binary) while pid 1 ``wait``s for it, which reaps orphans too
#: (bash's wait collects any child).
TRUSTED_PID1 = 'trap "exit 0" TERM; while :; do (read -t 86400 <> <(:)) & wait $!; done'
PRELOAD = "/etc/ld.so.preload"
PUT_ATTEMPTS = 3
log = logging.getLogger(__name__)

#: Captured bundles by (engine URL, image id); None: the image has no bash. Concurrent first uses
#: may both capture; the first result is kept.
_BUNDLES: dict[tuple[str, str], ShellBundle | None] = {}


@dataclass(frozen=True, slots=True)
class TrustedShell:
    """A bundle and where a fork's container has it; ``scratch`` is where the wrapper keeps output."""

    bundle: ShellBundle
    dir: str
    scratch: str

    @classmethod
    def fresh(cls, bundle: ShellBundle) -> TrustedShell:
        tag = secrets.token_hex(8)
        return cls(bundle, f"/.ares-shell-{tag}", f"/.ares-run-{tag}")

    def argv(self, *args: str) -> list[str]:
        """The command line that runs the bundle's bash with ``args`` (no PATH lookup)."""
        return self.bundle.argv(self.dir, *args)


async def image_shell(
    engine_url: str, image: str, pristine: Callable[[], AbstractAsyncContextManager[Sandbox]]
) -> ShellBundle | None:
    """The bash of ``image`` (an image id on the engine at ``engine_url``), captured on first use from
    ``pristine()``: an unstarted sandbox of that image, without network."""
    key = (engine_url, image)
    if key not in _BUNDLES:
        async with pristine() as sandbox:
            bundle = await capture_shell(sandbox)
        _BUNDLES.setdefault(key, bundle)
    return _BUNDLES[key]


def seeded_paths(shell: TrustedShell | None, fresh: Iterable[str]) -> tuple[str, ...]:
    """What :func:`prepare` replaces or adds (a fresh dir's whole top-level dir)."""
    tops = {"/" + posixpath.normpath(posixpath.join("/", p)).strip("/").split("/")[0] for p in fresh}
    extra = () if shell is None else (shell.dir, shell.scratch, PRELOAD)
    return (*sorted(tops), *extra)


def _add(tar: tarfile.TarFile, name: str, mode: int, data: bytes | None = None) -> None:
    info = tarfile.TarInfo(name)
    info.mode = mode
    if data is None:
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
    else:
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))


def seed_archive(shell: TrustedShell | None, fresh: Iterable[str]) -> bytes | None:
    """A tar to extract at / that makes each ``fresh`` dir empty and writable by everyone (its
    top-level dir is replaced as a whole, as ``rm -rf /top && mkdir -p`` would: an entry of the same
    name that is a file first, so whatever was there, a symlink included, is removed rather than
    merged into or followed) and puts ``shell``'s bundle and scratch dir in. None: nothing to do."""
    buf = io.BytesIO()
    count = 0
    with tarfile.open(fileobj=buf, mode="w") as tar:
        made: set[str] = set()
        for path in fresh:
            parts = posixpath.normpath(posixpath.join("/", path)).strip("/").split("/")
            if parts == [""]:
                raise ValueError("/ cannot be made a fresh directory")
            for depth in range(1, len(parts) + 1):
                name = "/".join(parts[:depth])
                if name in made:
                    continue
                made.add(name)
                if depth == 1:
                    _add(tar, name, 0o644, b"")
                _add(tar, name, 0o777 if depth == len(parts) else 0o755)  # USER may not be root
            count += 1
        if shell is not None:
            folder = shell.dir.strip("/")
            _add(tar, folder, 0o555)
            for name, data in sorted(shell.bundle.files.items()):
                _add(tar, f"{folder}/{name}", 0o555, data)
            _add(tar, shell.scratch.strip("/"), 0o777)
            count += 1
    return buf.getvalue() if count else None


def prepare(api: docker.APIClient, container: str, shell: TrustedShell | None, fresh: Sequence[str]) -> None:
    """Seed a created (not yet started) container; with ``shell``, neutralize /etc/ld.so.preload,
    which glibc's loader reads even when run explicitly. Blocking."""
    archive = seed_archive(shell, fresh)
    if archive is not None:
        _put(api, container, "/", archive)
    if shell is None:
        return
    # An empty regular file whenever /etc is a directory, not only when ld.so.preload exists: the
    # archive API's stat follows a final symlink on Podman, so a link to a path that the tests might
    # create later would look absent. Lstat semantics on extraction replace a link, never follow it.
    etc = stat_path(api, container, "/etc")
    if etc is not None and etc.get("isDir"):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            _add(tar, posixpath.basename(PRELOAD), 0o644, b"")
        _put(api, container, posixpath.dirname(PRELOAD), buf.getvalue())


def _put(api: docker.APIClient, container: str, path: str, archive: bytes) -> None:
    """``put_archive``, tried again after an engine error: Podman's extraction helper now and then
    dies mid-stream ("passing bulk input to subprocess: write |1: broken pipe"). Every archive here
    is idempotent (a fresh dir is replaced as a whole again)."""
    for attempt in range(PUT_ATTEMPTS):
        try:
            api.put_archive(container, path, archive)
            return
        except docker.errors.APIError as exc:
            if exc.status_code is None or exc.status_code < 500 or attempt == PUT_ATTEMPTS - 1:
                raise
            log.warning("the engine failed to extract an archive (%s); trying again", api_message(exc))
            time.sleep(0.2 * (attempt + 1))
