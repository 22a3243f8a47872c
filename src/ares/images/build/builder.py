"""The local image builder: a Dockerfile becomes a stack of cached overlay layers.

Each instruction is one cache entry keyed by its parent's key, the instruction text, the build
arguments in scope and, for COPY/ADD, the hash of the files it reads. RUN, COPY, ADD and WORKDIR run in
a local sandbox (network on) on top of the layers so far; the sandbox's diff becomes the layer. The
other instructions only change the image config. Editing a line rebuilds from that line on.

Progress is reported as ``BuildEvent``s (see ``progress``) to the builder's ``on_event`` listener,
else to the listener installed for the calling context; nothing is printed.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shlex
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import TextIO

from ares.errors import ImageBuildError
from ares.images.build.context import BuildContext
from ares.images.build.dockerfile import (
    DockerfileError,
    Instruction,
    expand,
    key_values,
    parse_dockerfile,
    split_words,
)
from ares.images.build.standins import (
    DEBIAN_SUITE,
    BaseImage,
    base_plan,
    debian_base_key,
    resolve_base,
)
from ares.images.build.steps import BuildCommand, StepRunner
from ares.images.cache import ImageCache, ImageRecord, LayerRecord, staged_dir
from ares.images.config import ImageConfig
from ares.images.progress import (
    BuildEvent,
    BuildListener,
    BuildState,
    context_label,
    current_listener,
    emit,
    step_text,
)
from ares.images.rootfs import RootfsPlan

#: Host variables a RUN step inherits at build time only: package mirrors and proxies (Docker passes
#: the proxy ones as predefined build args). They are never part of the image or of cache keys.
BUILD_PASSTHROUGH = (
    "http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
    "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST", "PIP_CERT", "PIP_DEFAULT_TIMEOUT",
    "UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "npm_config_registry",
)  # fmt: skip
DEFAULT_STEP_TIMEOUT_S = 1800.0
CONFIG_ONLY = frozenset(
    {
        "ARG", "ENV", "USER", "SHELL", "LABEL", "EXPOSE", "CMD", "ENTRYPOINT", "VOLUME", "STOPSIGNAL",
        "HEALTHCHECK", "MAINTAINER", "ONBUILD",
    }
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class BuildStep:
    """How one instruction was satisfied: from the cache or by running it."""

    index: int
    instruction: str
    key: str
    cached: bool
    duration_s: float


@dataclass(frozen=True, slots=True)
class LocalImage:
    """A built image: its mount plan (base + layers) and the defaults its sandboxes start with."""

    key: str
    base: str
    plan: RootfsPlan
    config: ImageConfig
    steps: tuple[BuildStep, ...] = ()
    log_path: Path | None = None

    @property
    def cached(self) -> bool:
        return all(step.cached for step in self.steps)


@dataclass
class _State:
    key: str
    plan: RootfsPlan
    config: ImageConfig
    args: dict[str, str]
    layers: list[str] = field(default_factory=list)

    @property
    def variables(self) -> dict[str, str]:
        return {**self.args, **self.config.env}


#: Executes one build step on top of a state, writing its diff under the staging dir; returns the config.
Action = Callable[[_State, Path], Awaitable[ImageConfig]]


class ImageBuilder:
    """Builds Dockerfiles into the cache. One instance may serve many concurrent builds.

    ``on_log`` receives every build log line; ``on_event`` every ``BuildEvent`` (default: the
    listener installed with ``progress.build_listener`` where ``build()`` is called, if any).
    """

    def __init__(
        self,
        cache: ImageCache | None = None,
        *,
        runner: StepRunner,
        on_log: Callable[[str], None] | None = None,
        on_event: BuildListener | None = None,
        build_env: Mapping[str, str] | None = None,
        step_timeout_s: float = DEFAULT_STEP_TIMEOUT_S,
    ) -> None:
        self.cache = cache or ImageCache()
        self.runner = runner
        self.on_log = on_log
        self.on_event = on_event
        if build_env is None:
            build_env = {k: v for k, v in os.environ.items() if k in BUILD_PASSTHROUGH}
        self.build_env = dict(build_env)
        self.step_timeout_s = step_timeout_s

    async def build(
        self,
        context_dir: Path,
        *,
        dockerfile: str = "Dockerfile",
        build_args: Mapping[str, str] | None = None,
        tags: tuple[str, ...] = (),
    ) -> LocalImage:
        path = context_dir / dockerfile
        try:
            text = path.read_text()
        except OSError as exc:
            raise DockerfileError(f"cannot read {path}: {exc.strerror}") from exc
        label = _label(context_dir)
        log_path = self.cache.log_path(label)
        with open(log_path, "w") as log:  # noqa: ASYNC230 - a local log file
            build = _Build(self, BuildContext(context_dir), dict(build_args or {}), log, label)
            image = await build.run(parse_dockerfile(text), source=str(path.resolve()), tags=tags)
        return replace(image, log_path=log_path)

    async def from_name(self, name: str) -> LocalImage:
        """A tagged image from the cache, or a bare base image (e.g. ``python:3.11-slim``)."""
        record = self.cache.find(name)
        if record is not None:
            return await self.load(record)
        return await self.build_text(f"FROM {name}\n", label=name)

    async def build_text(
        self, text: str, *, label: str = "inline", context_dir: Path | None = None
    ) -> LocalImage:
        log_path = self.cache.log_path(label)
        with open(log_path, "w") as log:  # noqa: ASYNC230 - a local log file
            context = BuildContext(context_dir or Path("/nonexistent-context"))
            build = _Build(self, context, {}, log, label)
            image = await build.run(parse_dockerfile(text), source=label, tags=())
        return replace(image, log_path=log_path)

    async def load(self, record: ImageRecord) -> LocalImage:
        """Rebuild the plan of a cached image record (bases are per process, layers are shared)."""
        base = resolve_base(record.base)
        plan = await base_plan(base, self.cache, self.runner)
        config = base.config
        for key in record.layers:
            layer = self.cache.layer(key)
            if layer is None:
                raise ImageBuildError(f"image {record.key[:12]} lost layer {key[:12]}; rebuild it")
            if layer.has_fs:
                plan = plan.stacked_on(self.cache.layer_dir(key) / "fs")
            config = layer.config
        return LocalImage(record.key, record.base, plan, config)


class _Build:
    """One run of the builder over one Dockerfile."""

    def __init__(
        self,
        builder: ImageBuilder,
        context: BuildContext,
        build_args: dict[str, str],
        log: TextIO,
        label: str = "image",
    ) -> None:
        self.builder = builder
        self.cache = builder.cache
        self.context = context
        self.build_args = build_args
        self.log = log
        self.steps: list[BuildStep] = []
        self.label = label
        self.listener = builder.on_event or current_listener()
        self.total = 0
        #: Step index -> "done" (something ran for it, e.g. a debootstrap for FROM) or "cached".
        self._outcomes: dict[int, str] = {}
        #: The step in progress (index, text, start) while it may be running: named if the build fails.
        self._current: tuple[int, str, float] | None = None

    def event(self, index: int, step: str, state: BuildState, elapsed_s: float = 0.0) -> None:
        if state == "building":
            self._current = (index, step, time.monotonic())
        else:
            self._current = None
            if state == "done" or (state == "cached" and index not in self._outcomes):
                self._outcomes[index] = state
        emit(self.listener, BuildEvent(self.label, step_text(step), index, self.total, state, elapsed_s))

    async def run(self, instructions: list[Instruction], *, source: str, tags: tuple[str, ...]) -> LocalImage:
        started = time.monotonic()
        try:
            image = await self._run(instructions, source=source, tags=tags)
        except BaseException:
            if self.listener is not None and self.total:
                if self._current is not None:
                    index, step, since = self._current
                    self.event(index, step, "failed", time.monotonic() - since)
                self._image_event("failed", started)
            raise
        self._image_event("done" if "done" in self._outcomes.values() else "cached", started)
        return image

    def _image_event(self, state: BuildState, started: float) -> None:
        outcomes = list(self._outcomes.values())
        built, cached = outcomes.count("done"), outcomes.count("cached")
        elapsed = time.monotonic() - started
        emit(
            self.listener,
            BuildEvent(self.label, None, len(outcomes), self.total, state, elapsed, built, cached),
        )

    def say(self, line: str) -> None:
        self.log.write(line + "\n")
        self.log.flush()
        if self.builder.on_log is not None:
            self.builder.on_log(line)

    async def _run(
        self, instructions: list[Instruction], *, source: str, tags: tuple[str, ...]
    ) -> LocalImage:
        global_args: dict[str, str] = {}
        index = 0
        while instructions[index].keyword == "ARG":
            for name, default in key_values(instructions[index].args, "ARG", instructions[index].line):
                global_args[name] = self.build_args.get(name, expand(default, global_args))
            index += 1
        first = instructions[index]
        if first.keyword != "FROM":
            raise DockerfileError(f"line {first.line}: expected FROM, got {first.keyword}")
        for later in instructions[index + 1 :]:
            if later.keyword == "FROM":
                raise DockerfileError(
                    f"line {later.line}: multi-stage builds (a second FROM) are not supported by the local "
                    "builder; use the docker backend"
                )
        words = split_words(expand(first.args, global_args))
        if not words:
            raise DockerfileError(f"line {first.line}: FROM needs an image name")
        total = len(instructions) - index
        self.total = total
        emit(self.listener, BuildEvent(self.label, None, 0, total, "building"))
        self.say(f"Step 1/{total} : FROM {words[0]}")
        from_text = f"FROM {words[0]}"
        from_started = time.monotonic()
        parent = self.cache.find(words[0])
        fresh_base = False
        if parent is not None:  # an image built earlier and tagged
            loaded = await self.builder.load(parent)
            base_name = parent.base
            state = _State(parent.key, loaded.plan, loaded.config, {}, list(parent.layers))
            self.say(f" ---> {parent.key[:12]} (tagged image from the cache)")
        else:
            base = resolve_base(words[0])
            for note in base.notes:
                self.say(f" ---> note: {note}")
            base_name = base.name
            fresh_base = base.kind == "debian" and not _debian_root_ready(self.cache)
            if fresh_base:
                self.event(1, f"{from_text} (debootstrap of Debian {DEBIAN_SUITE}, once)", "building")
            state = await self._start(base)
        from_elapsed = time.monotonic() - from_started
        self.event(1, from_text, "done" if fresh_base else "cached", from_elapsed)
        self.steps.append(BuildStep(1, from_text, state.key, True, 0.0))
        for step, instruction in enumerate(instructions[index + 1 :], start=2):
            self.say(f"Step {step}/{total} : {instruction.source}")
            state = await self._step(state, instruction, step)
        self.say(f"Successfully built {state.key[:12]}")
        now = time.time()
        record = ImageRecord(state.key, base_name, tuple(state.layers), tags, source, now, now)
        self.cache.save_image(record)
        return LocalImage(state.key, base_name, state.plan, state.config, tuple(self.steps))

    async def _start(self, base: BaseImage) -> _State:
        notes: list[str] = []
        base_key = base.key if base.kind == "host" else await debian_base_key(self.cache)
        plan = await base_plan(base, self.cache, self.builder.runner, notes)
        for note in notes:
            self.say(f" ---> {note}")
        state = _State(_hash("base", base_key), plan, base.config, {})
        for script in base.setup:
            text = f"(base setup for {base.name})"
            state = await self._cached(state, text, {}, self._runner(script), index=1)
        return state

    def _runner(self, script: str) -> Action:
        async def run(state: _State, staged: Path) -> ImageConfig:
            await self._in_sandbox(state, staged, shlex.join(["/bin/sh", "-c", script]), user="0")
            return state.config

        return run

    async def _step(self, state: _State, ins: Instruction, index: int) -> _State:
        keyword = ins.keyword
        if keyword in CONFIG_ONLY:
            config, args = self._configure(state, ins)
            key = _hash(state.key, ins.source, sorted(args.items()))
            self.say(f" ---> {key[:12]}")
            self.event(index, ins.source, "cached")
            self.steps.append(BuildStep(index, ins.source, key, True, 0.0))
            return _State(key, state.plan, config, args, state.layers)
        if "from" in ins.flags:
            raise DockerfileError(
                f"line {ins.line}: COPY --from (multi-stage) is not supported by the local builder"
            )
        extra: dict[str, object] = {"args": sorted(state.args.items())}
        if keyword == "RUN":
            action = self._run_action(ins)
        elif keyword in ("COPY", "ADD"):
            # Globbing and hashing the context reads files: keep it off the event loop.
            action, extra["inputs"] = await asyncio.to_thread(self._copy_action, state, ins)
        elif keyword == "WORKDIR":
            action = self._workdir_action(state, ins)
        else:  # parse_dockerfile only lets known keywords through; FROM was handled by run()
            raise DockerfileError(f"line {ins.line}: {keyword} is not supported here")
        new_state = await self._cached(state, ins.source, extra, action, index=index)
        self.steps[-1] = replace(self.steps[-1], index=index)
        return new_state

    async def _cached(
        self, state: _State, text: str, extra: dict[str, object], action: Action, *, index: int
    ) -> _State:
        key = _hash(state.key, text, extra)
        record = self.cache.layer(key)
        started = time.monotonic()
        if record is None:
            # Building, or waiting for a concurrent build of the same layer (then it is cached).
            self.event(index, text, "building")
            async with self.cache.lock(f"layer-{key}"):
                record = self.cache.layer(key)
                if record is None:
                    with staged_dir(self.cache) as staged:
                        config = await action(state, staged)
                        has_fs = (staged / "fs").is_dir()
                        size = await asyncio.to_thread(self.cache.size_bytes, staged / "fs") if has_fs else 0
                        duration = time.monotonic() - started
                        record = LayerRecord(
                            key, state.key, text, config, has_fs, size, time.time(), duration
                        )
                        self.cache.publish_layer(staged, record)
                    self.say(f" ---> {key[:12]} ({duration:.1f}s, {size / 1e6:.1f} MB)")
                    self.event(index, text, "done", duration)
                    self.steps.append(BuildStep(len(self.steps) + 1, text, key, False, duration))
                    return self._after(state, record)
        self.say(f" ---> Using cache {key[:12]}")
        self.event(index, text, "cached", time.monotonic() - started)
        self.steps.append(BuildStep(len(self.steps) + 1, text, key, True, time.monotonic() - started))
        return self._after(state, record)

    def _after(self, state: _State, record: LayerRecord) -> _State:
        plan = state.plan.stacked_on(self.cache.layer_dir(record.key) / "fs") if record.has_fs else state.plan
        return _State(record.key, plan, record.config, state.args, [*state.layers, record.key])

    # ------------------------------------------------------------------ instructions
    def _configure(self, state: _State, ins: Instruction) -> tuple[ImageConfig, dict[str, str]]:
        config, args = state.config, dict(state.args)
        text = ins.args
        if ins.keyword == "ARG":
            for name, default in key_values(text, "ARG", ins.line):
                args[name] = self.build_args.get(name, expand(default, state.variables))
        elif ins.keyword == "ENV":
            values = {k: expand(v, {**args, **config.env}) for k, v in key_values(text, "ENV", ins.line)}
            config = config.with_env(**values)
        elif ins.keyword in ("LABEL", "MAINTAINER"):
            pairs = key_values(text, "LABEL", ins.line) if ins.keyword == "LABEL" else [("maintainer", text)]
            values = {k: expand(v, state.variables) for k, v in pairs}
            config = replace(config, labels={**config.labels, **values})
        elif ins.keyword == "USER":
            config = replace(config, user=expand(text.strip(), state.variables))
        elif ins.keyword == "SHELL":
            shell = ins.json_args
            if not shell:
                raise DockerfileError(f'line {ins.line}: SHELL needs the JSON form, e.g. ["/bin/bash", "-c"]')
            config = replace(config, shell=tuple(shell))
        elif ins.keyword in ("CMD", "ENTRYPOINT"):
            argv = tuple(ins.json_args or (*config.shell, text))
            config = replace(config, **{ins.keyword.lower(): argv})
        elif ins.keyword == "EXPOSE":
            ports = tuple(expand(w, state.variables) for w in split_words(text))
            config = replace(config, exposed_ports=tuple(dict.fromkeys((*config.exposed_ports, *ports))))
        elif ins.keyword == "VOLUME":
            volumes = ins.json_args or split_words(text)
            config = replace(config, volumes=(*config.volumes, *volumes))
        elif ins.keyword == "STOPSIGNAL":
            config = replace(config, stop_signal=text.strip())
        elif ins.keyword == "HEALTHCHECK":
            config = replace(config, healthcheck=text.strip())
        elif ins.keyword == "ONBUILD":
            self.say(" ---> note: ONBUILD only affects images built FROM this one; recorded nowhere")
        return config, args

    def _run_action(self, ins: Instruction) -> Action:
        async def run(state: _State, staged: Path) -> ImageConfig:
            argv = ins.json_args
            if argv is not None:
                command = shlex.join(argv)
            elif ins.heredocs and ins.args.strip().lstrip("<-").strip("'\"") == ins.heredocs[0].name:
                command = shlex.join([*state.config.shell, ins.heredocs[0].body])  # RUN <<EOF: a script
            else:
                script = ins.args + "".join(f"\n{h.body}{h.name}" for h in ins.heredocs)
                command = shlex.join([*state.config.shell, script])
            await self._in_sandbox(state, staged, command)
            return state.config

        return run

    def _copy_action(self, state: _State, ins: Instruction) -> tuple[Action, str]:
        workdir = state.config.workdir or "/"
        if ins.heredocs:  # COPY <<EOF /path: inline files
            dest = expand(split_words(ins.args)[-1], state.variables)
            files = {h.name: expand(h.body, state.variables) if h.expand else h.body for h in ins.heredocs}
            payload = json.dumps({"dest": dest, "files": files}, sort_keys=True)
            digest = hashlib.sha256(payload.encode()).hexdigest()
            return self._upload_files(files, dest, workdir, ins), digest
        words = ins.json_args or split_words(ins.args)
        words = [expand(w, state.variables) for w in words]
        if len(words) < 2:
            raise DockerfileError(f"line {ins.line}: {ins.keyword} needs a source and a destination")
        for src in words[:-1]:
            if "://" in src or src.startswith("git@"):
                raise DockerfileError(
                    f"line {ins.line}: ADD of a URL ({src}) is not supported by the local builder; "
                    "use RUN curl/wget (the network is on while building)"
                )
        sources = self.context.sources(words[:-1], words[-1], workdir, ins.line)
        chmod = int(ins.flags["chmod"], 8) if ins.flags.get("chmod") else None
        digest = self.context.digest(sources) + json.dumps(ins.flags, sort_keys=True)

        async def run(state: _State, staged: Path) -> ImageConfig:
            unpack = ins.keyword == "ADD"
            archive = await asyncio.to_thread(self.context.tar, sources, chmod=chmod, extract=unpack)
            targets = " ".join(shlex.quote(str(s.target)) for s in sources)
            chown = ins.flags.get("chown")
            post = f" && chown -R {shlex.quote(chown)} {targets}" if chown else ""
            await self._in_sandbox(state, staged, f"tar -xpf - -C / --no-overwrite-dir{post}", stdin=archive)
            return state.config

        return run, digest

    def _upload_files(self, files: dict[str, str], dest: str, workdir: str, ins: Instruction) -> Action:
        target = PurePosixPath(dest if dest.startswith("/") else f"{workdir}/{dest}")
        as_dir = len(files) > 1 or dest.endswith("/")
        paths = {str(target / name if as_dir else target): body for name, body in files.items()}
        script = " && ".join(
            f"mkdir -p {shlex.quote(str(PurePosixPath(path).parent))} && printf %s {shlex.quote(body)} > "
            + shlex.quote(path)
            for path, body in paths.items()
        )

        async def run(state: _State, staged: Path) -> ImageConfig:
            await self._in_sandbox(state, staged, script)
            return state.config

        return run

    def _workdir_action(self, state: _State, ins: Instruction) -> Action:
        path = expand(ins.args.strip(), state.variables)
        if not path:
            raise DockerfileError(f"line {ins.line}: WORKDIR needs a path")
        absolute = str(PurePosixPath(state.config.workdir or "/") / path)

        async def run(state: _State, staged: Path) -> ImageConfig:
            await self._in_sandbox(state, staged, f"mkdir -p {shlex.quote(absolute)}", user="0")
            return replace(state.config, workdir=absolute)

        return run

    async def _in_sandbox(
        self,
        state: _State,
        staged: Path,
        command: str,
        *,
        stdin: bytes | None = None,
        user: str | None = None,
    ) -> None:
        """Run one build command on top of the layers so far and commit its diff to ``staged/fs``."""
        command_spec = BuildCommand(
            plan=state.plan,
            config=replace(state.config, env={}),
            command=command,
            diff_dir=staged / "fs",
            scratch_dir=staged,
            env={**state.args, **self.builder.build_env, **state.config.env},
            workdir=state.config.workdir or "/",
            user=user,
            stdin=stdin,
            timeout_s=self.builder.step_timeout_s,
        )
        result = await self.builder.runner.run(command_spec)
        for stream in (result.stdout, result.stderr):
            for line in stream.splitlines():
                self.say(f"  | {line}")
        if not result.ok:
            why = "timed out" if result.timed_out else f"exited with code {result.exit_code}"
            tail = (result.stdout + result.stderr).strip()[-2000:]
            raise ImageBuildError(f"build step {command[:200]!r} {why}:\n{tail}")


def _debian_root_ready(cache: ImageCache) -> bool:
    """Whether the Debian base exists already (else the first build debootstraps it)."""
    return (cache.root / "bases" / f"debian-{DEBIAN_SUITE}" / "base.json").exists()


def _label(context_dir: Path) -> str:
    """``task-environment``: a readable log name for a Harbor task's build context."""
    return context_label(context_dir)


def _hash(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()
