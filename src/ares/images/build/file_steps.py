"""COPY and ADD steps: files from the build context, heredocs, another stage or image, and URLs,
each turned into a tar that the build sandbox extracts at ``/`` (see ``copying`` and ``remote``)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shlex
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ares.images.build import copying, remote
from ares.images.build.bases import Substitution
from ares.images.build.context import BuildContext
from ares.images.build.dockerfile import DockerfileError, Instruction, expand, split_words
from ares.images.build.model import BuildSettings
from ares.images.cache import ImageCache
from ares.images.config import ImageConfig
from ares.images.rootfs import RootfsPlan


@dataclass
class _State:
    key: str
    plan: RootfsPlan
    config: ImageConfig
    args: dict[str, str]
    layers: list[str] = field(default_factory=list)
    base: str = ""
    substitutions: tuple[Substitution, ...] = ()

    @property
    def variables(self) -> dict[str, str]:
        return {**self.args, **self.config.env}


#: Executes one build step on top of a state, writing its diff under the staging dir; returns the config.
Action = Callable[[_State, Path], Awaitable[ImageConfig]]


class FileSteps:
    """The COPY/ADD actions of a ``BuildSession``."""

    builder: BuildSettings
    cache: ImageCache
    context: BuildContext

    def say(self, line: str) -> None:
        raise NotImplementedError

    def _extract(
        self, make_tar: Callable[[], Awaitable[tuple[bytes, list[Any]]]], chown: str | None
    ) -> Action:
        raise NotImplementedError

    async def _in_sandbox(
        self,
        state: _State,
        staged: Path,
        command: str,
        *,
        stdin: bytes | None = None,
        user: str | None = None,
    ) -> None: ...

    def _copy_action(self, state: _State, ins: Instruction) -> tuple[Action, str]:
        workdir = state.config.workdir or "/"
        if ins.heredocs:  # COPY <<EOF /path: inline files
            dest = expand(split_words(ins.args)[-1], state.variables)
            files = {h.name: expand(h.body, state.variables) if h.expand else h.body for h in ins.heredocs}
            payload = json.dumps({"dest": dest, "files": files}, sort_keys=True)
            digest = hashlib.sha256(payload.encode()).hexdigest()
            return self._upload_files(files, dest, workdir), digest
        words = [expand(w, state.variables) for w in ins.json_args or split_words(ins.args)]
        if len(words) < 2:
            raise DockerfileError(f"line {ins.line}: {ins.keyword} needs a source and a destination")
        for src in words[:-1]:
            if "://" in src or src.startswith("git@"):
                raise DockerfileError(
                    f"line {ins.line}: {ins.keyword} of {src} is not supported by the local builder "
                    "(ADD takes http(s) URLs; use RUN git clone for repositories)"
                )
        sources = self.context.sources(words[:-1], words[-1], workdir, ins.line)
        chmod = int(ins.flags["chmod"], 8) if ins.flags.get("chmod") else None
        digest = self.context.digest(sources) + json.dumps(ins.flags, sort_keys=True)

        async def make_tar() -> tuple[bytes, list[Any]]:
            unpack = ins.keyword == "ADD"
            archive = await asyncio.to_thread(self.context.tar, sources, chmod=chmod, extract=unpack)
            return archive, [s.target for s in sources]

        return self._extract(make_tar, ins.flags.get("chown")), digest

    def _upload_files(self, files: dict[str, str], dest: str, workdir: str) -> Action:
        target = copying.destination(dest, workdir)
        as_dir = len(files) > 1 or dest.endswith("/")
        paths = {str(target / name if as_dir else target): body for name, body in files.items()}
        script = " && ".join(
            f"mkdir -p {shlex.quote(str(Path(path).parent))} && printf %s {shlex.quote(body)} > "
            + shlex.quote(path)
            for path, body in paths.items()
        )

        async def run(state: _State, staged: Path) -> ImageConfig:
            await self._in_sandbox(state, staged, script)
            return state.config

        return run

    def _copy_from_action(self, state: _State, ins: Instruction, source: _State) -> tuple[Action, str]:
        words = [expand(w, state.variables) for w in ins.json_args or split_words(ins.args)]
        if len(words) < 2:
            raise DockerfileError(f"line {ins.line}: COPY --from needs a source and a destination")
        paths = copying.export_paths(words[:-1], ins.line)
        dest, workdir = words[-1], state.config.workdir or "/"
        chmod = int(ins.flags["chmod"], 8) if ins.flags.get("chmod") else None
        inputs = _hash("from", source.key, paths, dest, sorted(ins.flags.items()))

        async def make_tar() -> tuple[bytes, list[Any]]:
            scratch = self.cache.scratch()
            exported = await self.builder.runner.export(source.plan, paths, scratch)
            return await asyncio.to_thread(
                copying.rewrite_export, exported, paths, dest, workdir, chmod=chmod, line=ins.line
            )

        return self._extract(make_tar, ins.flags.get("chown")), inputs

    async def _add_url_action(self, state: _State, ins: Instruction) -> tuple[Action, str]:
        words = [expand(w, state.variables) for w in ins.json_args or split_words(ins.args)]
        if len(words) != 2:
            raise DockerfileError(f"line {ins.line}: ADD <url> takes one URL and a destination")
        url, dest = words
        checksum = remote.parse_checksum(ins.flags.get("checksum"), ins.line)
        target = copying.destination(dest, state.config.workdir or "/")
        if dest.endswith("/"):
            target = target / remote.url_file_name(url)
        mode = int(ins.flags["chmod"], 8) if ins.flags.get("chmod") else 0o600
        fetched: list[remote.Download] = []
        flags = sorted((k, v) for k, v in ins.flags.items() if k != "checksum")
        if checksum is not None:
            identity = f"sha256:{checksum}"
        else:
            identity = await remote.probe(url) or ""
            if identity:
                identity = f"{url};{identity}"
            else:  # the server gives no validator: the content is the identity
                fetched.append(await self._download(url, None, ins.line))
                identity = f"sha256:{fetched[0].sha256}"
        inputs = _hash("url", identity, str(target), flags)

        async def make_tar() -> tuple[bytes, list[Any]]:
            file = fetched[0] if fetched else await self._download(url, checksum, ins.line)
            return await asyncio.to_thread(remote.file_tar, file, target, mode=mode), [target]

        return self._extract(make_tar, ins.flags.get("chown")), inputs

    async def _download(self, url: str, checksum: str | None, line: int) -> remote.Download:
        path = (
            self.cache.scratch()
            / f"add-{hashlib.sha256(url.encode()).hexdigest()[:16]}-{time.monotonic_ns()}"
        )
        self.say(f" ---> downloading {url}")
        return await remote.download(url, path, checksum=checksum, line=line)


def _hash(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()
