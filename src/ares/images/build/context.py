"""The build context: which files a COPY/ADD reads, their content hash, and the tar that carries them."""

from __future__ import annotations

import fnmatch
import hashlib
import io
import os
import re
import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ares.images.build.dockerfile import DockerfileError

ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")


@dataclass(frozen=True, slots=True)
class CopySource:
    """A host path to copy and where it lands inside the image."""

    host: Path
    target: PurePosixPath
    is_dir: bool


class BuildContext:
    """A directory whose files COPY/ADD may read, minus what ``.dockerignore`` excludes."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        ignore = self.root / ".dockerignore"
        self._rules: list[tuple[bool, re.Pattern[str]]] = []
        if ignore.is_file():
            for line in ignore.read_text().splitlines():
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                negate = line.startswith("!")
                pattern = os.path.normpath(line.lstrip("!").strip("/"))
                self._rules.append((negate, _compile(pattern)))

    def ignored(self, rel: str) -> bool:
        verdict = False
        for negate, pattern in self._rules:
            if pattern.fullmatch(rel) or any(pattern.fullmatch(p) for p in _parents(rel)):
                verdict = not negate
        return verdict

    def sources(self, patterns: list[str], dest: str, workdir: str, line: int) -> list[CopySource]:
        """Resolve COPY sources (globs allowed) against the context; Docker's dest rules apply."""
        dest_path = PurePosixPath(dest if dest.startswith("/") else f"{workdir.rstrip('/')}/{dest}")
        matched: list[Path] = []
        for pattern in patterns:
            clean = os.path.normpath(pattern.lstrip("/"))
            if clean.startswith(".."):
                raise DockerfileError(f"line {line}: {pattern!r} is outside the build context")
            hits = sorted(self.root.glob(clean)) if any(c in clean for c in "*?[") else [self.root / clean]
            hits = [h for h in hits if h.exists() and not self.ignored(self.rel(h))]
            if not hits:
                raise DockerfileError(f"line {line}: COPY/ADD source {pattern!r} not found in {self.root}")
            matched.extend(hits)
        into_dir = dest.endswith("/") or len(matched) > 1 or any(c in p for p in patterns for c in "*?[")
        result = []
        for host in matched:
            resolved = host.resolve()
            if resolved != self.root and self.root not in resolved.parents:
                raise DockerfileError(f"line {line}: {host} points outside the build context")
            if host.is_dir():
                result.append(CopySource(host, dest_path, True))
            else:
                result.append(CopySource(host, dest_path / host.name if into_dir else dest_path, False))
        return result

    def rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix() if path != self.root else "."

    def files(self, source: CopySource) -> list[tuple[Path, PurePosixPath]]:
        """(host file or dir, target path) pairs, parents first, ignoring excluded entries."""
        if not source.is_dir:
            return [(source.host, source.target)]
        pairs: list[tuple[Path, PurePosixPath]] = []
        for dirpath, dirnames, filenames in os.walk(source.host):
            dirnames.sort()
            here = Path(dirpath)
            rel_dir = here.relative_to(source.host)
            if here != source.host:
                if self.ignored(self.rel(here)):
                    dirnames.clear()
                    continue
                pairs.append((here, source.target / rel_dir.as_posix()))
            for name in sorted(filenames):
                path = here / name
                if not self.ignored(self.rel(path)):
                    pairs.append((path, source.target / rel_dir.as_posix() / name))
        return pairs

    def digest(self, sources: list[CopySource]) -> str:
        """Hash of every file's target path, mode and content: the COPY's cache input."""
        digest = hashlib.sha256()
        for source in sources:
            for host, target in self.files(source):
                st = host.lstat()
                digest.update(f"{target}\0{st.st_mode:o}\0".encode())
                if host.is_symlink():
                    digest.update(os.readlink(host).encode())
                elif host.is_file():
                    with open(host, "rb") as f:
                        for chunk in iter(lambda f=f: f.read(1 << 20), b""):
                            digest.update(chunk)
        return digest.hexdigest()

    def tar(self, sources: list[CopySource], *, chmod: int | None = None, extract: bool = False) -> bytes:
        """A tar of the sources at their absolute targets (paths relative to ``/``), owned by root.

        With ``extract`` (ADD), local tar archives are unpacked into their destination directory.
        """
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as out:
            for source in sources:
                if extract and not source.is_dir and source.host.name.endswith(ARCHIVE_SUFFIXES):
                    _append_archive(out, source.host, source.target.parent)
                    continue
                for host, target in self.files(source):
                    info = out.gettarinfo(str(host), arcname=str(target).lstrip("/") or ".")
                    info.uid = info.gid = 0
                    info.uname = info.gname = "root"
                    if chmod is not None and not info.issym():
                        info.mode = chmod
                    if info.isreg():
                        with open(host, "rb") as f:
                            out.addfile(info, f)
                    else:
                        out.addfile(info)
        return buffer.getvalue()


def _append_archive(out: tarfile.TarFile, archive: Path, into: PurePosixPath) -> None:
    with tarfile.open(archive) as src:
        for member in src.getmembers():
            name = os.path.normpath(member.name).lstrip("/")
            if name.startswith(".."):
                continue
            member.name = str(into / name).lstrip("/")
            out.addfile(member, src.extractfile(member) if member.isreg() else None)


def _parents(rel: str) -> list[str]:
    parts = rel.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def _compile(pattern: str) -> re.Pattern[str]:
    """A .dockerignore pattern: ``**`` spans directories, ``*`` and ``?`` stay within one."""
    pieces = []
    for part in re.split(r"(\*\*/?)", pattern):
        if part.startswith("**"):
            pieces.append("(?:.*/)?" if part.endswith("/") else ".*")
        else:
            pieces.append(
                fnmatch.translate(part).removeprefix("(?s:").removesuffix(")\\Z").replace(".*", "[^/]*")
            )
    return re.compile("".join(pieces))
