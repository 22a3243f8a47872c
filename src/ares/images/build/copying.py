"""Files that COPY/ADD put into a layer, as one tar extracted at ``/`` in the build sandbox.

Sources: the build context (``context``), inline heredocs, another stage's or image's root
(``COPY --from``: the step runner exports the paths as a tar, re-rooted here at the destination),
and URLs (``remote``). Docker's destination rules hold for all: a destination ending in ``/``, several
sources or a glob make it a directory; a directory source copies its contents.
"""

from __future__ import annotations

import fnmatch
import io
import posixpath
import shlex
import tarfile
from collections.abc import Iterable
from pathlib import PurePosixPath

from ares.images.build.dockerfile import DockerfileError

_GLOB = frozenset("*?[")
#: Extracts the tar on stdin at ``/`` without changing existing dirs' metadata (GNU tar), falling back
#: to plain ``tar -x`` where the flag is unknown (busybox).
EXTRACT = (
    "if tar --help 2>&1 | grep -q -e --no-overwrite-dir; then tar -xpf - -C / --no-overwrite-dir; "
    "else tar -xpf - -C /; fi"
)


def extract_command(targets: Iterable[PurePosixPath | str], chown: str | None) -> str:
    """The shell line that unpacks a COPY tar (and applies ``--chown`` to what it copied)."""
    if not chown:
        return EXTRACT
    paths = " ".join(shlex.quote(str(t)) for t in targets)
    return f"{{ {EXTRACT}; }} && chown -R {shlex.quote(chown)} {paths}"


def destination(dest: str, workdir: str) -> PurePosixPath:
    return PurePosixPath(dest if dest.startswith("/") else f"{workdir.rstrip('/')}/{dest}")


def has_glob(text: str) -> bool:
    return any(c in _GLOB for c in text)


def export_paths(patterns: list[str], line: int) -> list[str]:
    """``COPY --from`` sources as paths relative to the source root (globs kept)."""
    paths = []
    for pattern in patterns:
        clean = posixpath.normpath("/" + pattern).lstrip("/")
        if not clean or clean == ".":
            clean = "."
        paths.append(clean)
    return paths


def glob_quote(path: str) -> str:
    """Quote a path for ``sh`` leaving ``* ? [ ]`` active, so the shell expands globs."""
    return "".join(c if c.isalnum() or c in "*?[]/._-" else "\\" + c for c in path)


def export_command(paths: list[str]) -> str:
    """The shell line (cwd ``/``) that writes the tar of ``paths`` to stdout."""
    return "cd / && tar -cf - -- " + " ".join(glob_quote(p) for p in paths)


def rewrite_export(
    archive: bytes, paths: list[str], dest: str, workdir: str, *, chmod: int | None, line: int
) -> tuple[bytes, list[PurePosixPath]]:
    """Re-root an exported tar (members named by their path in the source root) at the destination.

    Returns the new tar and the top-level targets (for ``--chown``). Owners are kept, as ``COPY --from``
    does in Docker; ``--chmod`` replaces modes.
    """
    target_root = destination(dest, workdir)
    with tarfile.open(fileobj=io.BytesIO(archive)) as src:
        members = src.getmembers()
        roots: dict[str, bool] = {}  # matched top-level path -> is a dir
        owner: dict[str, str] = {}
        for member in members:
            name = posixpath.normpath(member.name).lstrip("/")
            root = _root_of(name, paths)
            if root is None:
                continue
            owner[member.name] = root
            if name == root:
                roots[root] = member.isdir()
            else:
                roots.setdefault(root, True)
        missing = [p for p in paths if not any(_matches(r, p) for r in roots)]
        if missing:
            raise DockerfileError(f"line {line}: COPY --from source {missing[0]!r} not found")
        into_dir = dest.endswith("/") or len(roots) > 1 or any(has_glob(p) for p in paths)

        def target_of(name: str) -> PurePosixPath | None:
            name = posixpath.normpath(name).lstrip("/")
            root = _root_of(name, paths)
            if root is None:
                return None
            if roots[root]:
                rest = name[len(root) :].lstrip("/") if root != "." else name
                return target_root / rest if rest and rest != "." else target_root
            return target_root / PurePosixPath(root).name if into_dir else target_root

        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as out:
            for member in members:
                target = target_of(member.name)
                if target is None:
                    continue
                if member.islnk():
                    link = target_of(member.linkname)
                    if link is None:
                        continue
                    member.linkname = str(link).lstrip("/")
                member.name = str(target).lstrip("/") or "."
                if chmod is not None and not member.issym():
                    member.mode = chmod
                out.addfile(member, src.extractfile(member) if member.isreg() else None)
    tops = [
        target_root if is_dir else (target_root / PurePosixPath(r).name if into_dir else target_root)
        for r, is_dir in roots.items()
    ]
    return buffer.getvalue(), list(dict.fromkeys(tops))


def _matches(root: str, pattern: str) -> bool:
    return root == pattern or (has_glob(pattern) and fnmatch.fnmatchcase(root, pattern))


def _root_of(name: str, patterns: list[str]) -> str | None:
    """The source path (a pattern's match) that tar member ``name`` lies in, if any."""
    parts = name.split("/")
    for pattern in patterns:
        if pattern == ".":
            return "."
        depth = pattern.count("/") + 1
        if len(parts) < depth:
            continue
        root = "/".join(parts[:depth])
        if _matches(root, pattern):
            return root
    return None
