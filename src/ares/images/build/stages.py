"""A Dockerfile as stages: global ARGs, one ``Stage`` per ``FROM``, and which stages a target needs.

Docker's rules: ARGs before the first FROM are global; they may be used in FROM lines, and inside a
stage only after an ``ARG NAME`` re-declares them. A stage is named by ``FROM … AS name`` or by its
index; ``FROM <stage>`` and ``COPY --from=<stage>`` make one stage depend on another, and a build of
``--target`` (default: the last stage) runs only the stages it depends on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ares.images.build.dockerfile import DockerfileError, Instruction, expand, key_values, split_words


@dataclass(frozen=True, slots=True)
class Stage:
    """One ``FROM`` and the instructions after it."""

    index: int
    name: str | None
    base: str  # the FROM image, global ARGs expanded (may name an earlier stage)
    platform: str | None
    line: int
    source: str  # the FROM instruction's text
    instructions: tuple[Instruction, ...]

    @property
    def label(self) -> str:
        return self.name or str(self.index)


@dataclass(frozen=True, slots=True)
class StagedDockerfile:
    global_args: dict[str, str]
    stages: tuple[Stage, ...]

    def find(self, ref: str, before: int | None = None) -> Stage | None:
        """The stage called ``ref`` (name, case-insensitive, or index), defined before ``before``."""
        limit = len(self.stages) if before is None else before
        for stage in self.stages[:limit]:
            if stage.name is not None and stage.name == ref.lower():
                return stage
        if ref.isdigit() and int(ref) < limit:
            return self.stages[int(ref)]
        return None

    def target(self, name: str | None) -> Stage:
        if name is None:
            return self.stages[-1]
        stage = self.find(name)
        if stage is None:
            known = ", ".join(s.label for s in self.stages)
            raise DockerfileError(f"target stage {name!r} not found in the Dockerfile (stages: {known})")
        return stage

    def needed(self, target: Stage) -> list[Stage]:
        """The stages ``target`` depends on (itself included), in Dockerfile order."""
        wanted: set[int] = set()
        todo = [target]
        while todo:
            stage = todo.pop()
            if stage.index in wanted:
                continue
            wanted.add(stage.index)
            for ref in self.references(stage):
                dep = self.find(ref, before=stage.index)
                if dep is not None:
                    todo.append(dep)
        return [s for s in self.stages if s.index in wanted]

    def references(self, stage: Stage) -> list[str]:
        """Names ``stage`` reads from: its FROM and every ``COPY --from`` (stage or image names)."""
        refs = [stage.base]
        for ins in stage.instructions:
            if ins.keyword in ("COPY", "ADD") and ins.flags.get("from"):
                refs.append(expand(ins.flags["from"], self.global_args))
        return refs


def split_stages(instructions: list[Instruction], build_args: Mapping[str, str]) -> StagedDockerfile:
    """Split parsed instructions into global ARGs and stages."""
    global_args: dict[str, str] = {}
    index = 0
    while index < len(instructions) and instructions[index].keyword == "ARG":
        ins = instructions[index]
        for name, default in key_values(ins.args, "ARG", ins.line):
            global_args[name] = build_args.get(name, expand(default, global_args))
        index += 1
    if index >= len(instructions) or instructions[index].keyword != "FROM":
        where = instructions[index] if index < len(instructions) else instructions[-1]
        raise DockerfileError(f"line {where.line}: expected FROM, got {where.keyword}")
    stages: list[Stage] = []
    names: set[str] = set()
    starts = [i for i in range(index, len(instructions)) if instructions[i].keyword == "FROM"]
    for number, start in enumerate(starts):
        end = starts[number + 1] if number + 1 < len(starts) else len(instructions)
        ins = instructions[start]
        words = split_words(expand(ins.args, global_args))
        if len(words) == 3 and words[1].lower() == "as":
            name: str | None = words[2].lower()
        elif len(words) == 1:
            name = None
        else:
            raise DockerfileError(f"line {ins.line}: FROM expects an image and optionally AS <name>")
        if name is not None:
            if name.isdigit() or name in names:
                raise DockerfileError(f"line {ins.line}: stage name {name!r} is a number or used twice")
            names.add(name)
        unknown = set(ins.flags) - {"platform"}
        if unknown:
            raise DockerfileError(f"line {ins.line}: FROM does not take --{', --'.join(sorted(unknown))}")
        platform = expand(ins.flags["platform"], global_args) if ins.flags.get("platform") else None
        stages.append(
            Stage(
                number, name, words[0], platform, ins.line, ins.source, tuple(instructions[start + 1 : end])
            )
        )
    return StagedDockerfile(global_args, tuple(stages))
