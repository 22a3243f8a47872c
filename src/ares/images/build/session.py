"""One run of the builder over one Dockerfile: stages in order, each instruction one cached layer.

A layer's key is its parent's key, the instruction text, the ARGs in scope and, for COPY/ADD, the hash
of what it reads (context files, the source stage's key and paths, a URL's checksum). A stage's first
key is its base's: a stand-in's identity, or the manifest digest of a pulled image, so a new upstream
image rebuilds everything on top of it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import shlex
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

from ares.errors import ImageBuildError
from ares.images.build import copying, remote
from ares.images.build.bases import ResolvedBase
from ares.images.build.context import BuildContext
from ares.images.build.dockerfile import DockerfileError, Instruction, expand, split_words
from ares.images.build.file_steps import Action, FileSteps, _State
from ares.images.build.instructions import CONFIG_ONLY, configure, run_command, workdir_path
from ares.images.build.model import BuildSettings, BuildStep, LocalImage
from ares.images.build.stages import Stage, StagedDockerfile
from ares.images.build.steps import BuildCommand
from ares.images.cache import ImageRecord, LayerRecord, staged_dir
from ares.images.config import ImageConfig
from ares.images.progress import BuildEvent, BuildState, current_listener, emit, step_text


class BuildSession(FileSteps):
    """Builds the stages a target needs, reporting steps to the log and the event listener."""

    def __init__(
        self,
        builder: BuildSettings,
        context: BuildContext,
        build_args: dict[str, str],
        log: TextIO,
        label: str = "image",
        image_dirs: tuple[Path, ...] = (),
    ) -> None:
        self.builder = builder
        self.image_dirs = image_dirs
        self.cache = builder.cache
        self.context = context
        self.build_args = build_args
        self.log = log
        self.steps: list[BuildStep] = []
        self.label = label
        self.listener = builder.on_event or current_listener()
        self.total = 0
        self.global_args: dict[str, str] = {}
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

    def say(self, line: str) -> None:
        self.log.write(line + "\n")
        self.log.flush()
        if self.builder.on_log is not None:
            self.builder.on_log(line)

    async def run(
        self, dockerfile: StagedDockerfile, target: str | None, *, source: str, tags: tuple[str, ...]
    ) -> LocalImage:
        started = time.monotonic()
        try:
            image = await self._run(dockerfile, target, source=source, tags=tags)
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
        emit(
            self.listener,
            BuildEvent(
                self.label, None, len(outcomes), self.total, state, time.monotonic() - started, built, cached
            ),
        )

    async def _run(
        self, dockerfile: StagedDockerfile, target_name: str | None, *, source: str, tags: tuple[str, ...]
    ) -> LocalImage:
        self.global_args = dockerfile.global_args
        target = dockerfile.target(target_name)
        stages = dockerfile.needed(target)
        self.total = sum(1 + len(s.instructions) for s in stages)
        emit(self.listener, BuildEvent(self.label, None, 0, self.total, "building"))
        skipped = [s.label for s in dockerfile.stages if s not in stages]
        if skipped:
            self.say(f"skipping stages not needed by {target.label}: {', '.join(skipped)}")
        states: dict[int, _State] = {}
        step = 0
        for stage in stages:
            step += 1
            state = await self._from(stage, step, dockerfile, states)
            for ins in stage.instructions:
                step += 1
                self.say(f"Step {step}/{self.total} : {ins.source}")
                state = await self._step(state, ins, step, dockerfile, stage, states)
            states[stage.index] = state
        state = states[target.index]
        self.say(f"Successfully built {state.key[:12]}")
        now = time.time()
        subs = tuple(s.to_dict() for s in state.substitutions)
        record = ImageRecord(state.key, state.base, tuple(state.layers), tags, source, now, now, subs)
        self.cache.save_image(record)
        return LocalImage(
            state.key,
            state.base,
            state.plan,
            state.config,
            tuple(self.steps),
            substitutions=state.substitutions,
        )

    async def _from(
        self, stage: Stage, index: int, dockerfile: StagedDockerfile, states: dict[int, _State]
    ) -> _State:
        text = f"FROM {stage.base}" + (f" AS {stage.name}" if stage.name else "")
        self.say(f"Step {index}/{self.total} : {text}")
        started = time.monotonic()
        earlier = dockerfile.find(stage.base.lower(), before=stage.index)
        if earlier is not None and earlier.index in states:
            parent = states[earlier.index]
            state = replace(parent, args={}, layers=list(parent.layers))
            self.say(f" ---> {parent.key[:12]} (stage {earlier.label})")
            self.event(index, text, "cached")
        else:
            slow = False

            def debootstrap() -> None:
                nonlocal slow
                slow = True
                self.event(index, f"{text} (debootstrap of Debian, once)", "building")

            notes: list[str] = []
            resolved = await self.builder.resolver(debootstrap, self.image_dirs).resolve(
                stage.base, platform=stage.platform, log=notes
            )
            for note in notes:
                self.say(f" ---> {note}")
            if resolved.note:
                self.say(f" ---> note: {resolved.note}")
            state = await self._start(resolved, index)
            self.event(index, text, "done" if slow else "cached", time.monotonic() - started)
        self.steps.append(BuildStep(index, text, state.key, True, 0.0))
        return state

    async def _start(self, base: ResolvedBase, index: int) -> _State:
        state = _State(base.key, base.plan, base.config, {}, list(base.layers), base.name, base.substitutions)
        for script in base.setup:
            # Keyed by the script's text too: a stand-in whose setup changes gets a new layer.
            script_id = {"script": hashlib.sha256(script.encode()).hexdigest()}
            state = await self._cached(
                state, f"(base setup for {base.name})", script_id, self._script(script), index=index
            )
        return state

    def _script(self, script: str) -> Action:
        async def run(state: _State, staged: Path) -> ImageConfig:
            await self._in_sandbox(state, staged, shlex.join(["/bin/sh", "-c", script]), user="0")
            return state.config

        return run

    async def _step(
        self,
        state: _State,
        ins: Instruction,
        index: int,
        dockerfile: StagedDockerfile,
        stage: Stage,
        states: dict[int, _State],
    ) -> _State:
        keyword = ins.keyword
        if keyword in CONFIG_ONLY:
            config, args, note = configure(
                state.config, state.args, ins, build_args=self.build_args, global_args=self.global_args
            )
            if note:
                self.say(f" ---> note: {note}")
            key = _hash(state.key, ins.source, sorted(args.items()))
            self.say(f" ---> {key[:12]}")
            self.event(index, ins.source, "cached")
            self.steps.append(BuildStep(index, ins.source, key, True, 0.0))
            return replace(state, key=key, config=config, args=args)
        extra: dict[str, object] = {"args": sorted(state.args.items())}
        if keyword == "RUN":
            action = self._run_action(ins)
        elif keyword in ("COPY", "ADD") and ins.flags.get("from"):
            ref = expand(ins.flags["from"], {**self.global_args, **state.args})
            source = await self._source_of(ref, dockerfile, stage, states)
            action, extra["inputs"] = self._copy_from_action(state, ins, source)
        elif keyword == "ADD" and any(remote.is_url(w) for w in split_words(ins.args)):
            action, extra["inputs"] = await self._add_url_action(state, ins)
        elif keyword in ("COPY", "ADD"):
            # Globbing and hashing the context reads files: keep it off the event loop.
            action, extra["inputs"] = await asyncio.to_thread(self._copy_action, state, ins)
        elif keyword == "WORKDIR":
            action = self._workdir_action(state, ins)
        else:  # parse_dockerfile only lets known keywords through; FROM starts a stage
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
        return replace(
            state, key=record.key, plan=plan, config=record.config, layers=[*state.layers, record.key]
        )

    # ------------------------------------------------------------------ actions
    def _run_action(self, ins: Instruction) -> Action:
        async def run(state: _State, staged: Path) -> ImageConfig:
            await self._in_sandbox(state, staged, run_command(ins, state.config))
            return state.config

        return run

    def _workdir_action(self, state: _State, ins: Instruction) -> Action:
        absolute = workdir_path(ins, state.config, state.variables)

        async def run(state: _State, staged: Path) -> ImageConfig:
            await self._in_sandbox(state, staged, f"mkdir -p {shlex.quote(absolute)}", user="0")
            return replace(state.config, workdir=absolute)

        return run

    def _extract(
        self, make_tar: Callable[[], Awaitable[tuple[bytes, list[Any]]]], chown: str | None
    ) -> Action:
        async def run(state: _State, staged: Path) -> ImageConfig:
            archive, targets = await make_tar()
            command = copying.extract_command(targets, chown)
            await self._in_sandbox(state, staged, command, stdin=archive, user="0")
            return state.config

        return run

    async def _source_of(
        self, ref: str, dockerfile: StagedDockerfile, stage: Stage, states: dict[int, _State]
    ) -> _State:
        """The root ``COPY --from=ref`` reads: an earlier stage, else an image (tagged or pulled)."""
        earlier = dockerfile.find(ref.lower(), before=stage.index)
        if earlier is not None:
            return states[earlier.index]
        resolved = await self.builder.resolver(image_dirs=self.image_dirs).resolve(ref)
        if resolved.setup:  # a stand-in with setup layers: build them (cached) like a FROM would
            return await self._start(resolved, 0)
        return _State(resolved.key, resolved.plan, resolved.config, {}, list(resolved.layers), resolved.name)

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


def _hash(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()
