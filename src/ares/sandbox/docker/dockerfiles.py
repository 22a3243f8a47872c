"""What the docker backend reads from a task's Dockerfile dir before building it: the content hash
its build is tagged with, and the plan of shared layers (the RUN steps before the first COPY/ADD,
one image each, see ``images.py``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ares.images.build.dockerfile import DockerfileError, expand, key_values, parse_dockerfile, split_words
from ares.images.progress import (
    step_text,
)

_DIRECTIVE = re.compile(r"#\s*[a-zA-Z][a-zA-Z0-9]*\s*=")


def context_hash(context: Path, build_args: Mapping[str, str]) -> str:
    """sha256 of the build args and every file under ``context`` (path, type, mode, content)."""
    digest = hashlib.sha256(b"ares-docker-build-v1\0")
    for key in sorted(build_args):
        digest.update(f"arg\0{key}\0{build_args[key]}\0".encode())
    for path in _walk(context):
        rel = path.relative_to(context).as_posix()
        st = path.lstat()
        digest.update(f"file\0{rel}\0{st.st_mode:o}\0".encode())
        if path.is_symlink():
            digest.update(os.readlink(path).encode())
        else:
            with open(path, "rb") as f:
                for chunk in iter(lambda f=f: f.read(1 << 20), b""):
                    digest.update(chunk)
        digest.update(b"\0")
    return digest.hexdigest()


@dataclass(frozen=True, slots=True)
class SharedStep:
    """A shared layer: Dockerfile text to build on top of the previous one, ending in a RUN."""

    body: str  # the instructions (verbatim), after FROM
    args: str  # the stage's ARG instructions before them, declared again after the new FROM
    label: str  # the RUN it ends with (for progress events)


@dataclass(frozen=True, slots=True)
class LayerPlan:
    """A Dockerfile split into shared layers (no context files read) and the rest."""

    head: str  # parser directives and global ARGs: the lines before FROM that matter
    base: str  # the FROM image name, build args expanded
    shared: tuple[SharedStep, ...]
    rest: str  # the instructions after the last shared RUN, verbatim
    rest_args: str  # the stage's ARG instructions among the shared steps
    rest_label: str

    def keys(self, base_id: str, build_args: Mapping[str, str]) -> list[str]:
        """The cache key of each shared layer: a chain from the base image's id."""
        args = json.dumps(sorted(build_args.items()))
        key = _sha("ares-docker-layer-v1", base_id, args, self.head)
        keys = []
        for step in self.shared:
            key = _sha(key, step.body)
            keys.append(key)
        return keys

    def dockerfile(self, parent: str, args: str, body: str) -> str:
        return f"{self.head}FROM {parent}\n{args}{body}"


def plan_layers(text: str, build_args: Mapping[str, str]) -> LayerPlan | None:
    """Split a Dockerfile at the RUN steps before its first COPY/ADD; None if that does not apply."""
    try:
        instructions = parse_dockerfile(text)
    except DockerfileError:
        return None  # the engine's parser reports it
    lines = text.splitlines()
    froms = [i for i, ins in enumerate(instructions) if ins.keyword == "FROM"]
    if len(froms) != 1 or instructions[froms[0]].flags:
        return None
    first = froms[0]
    spans = [_span(lines, ins.line, nxt.line if nxt else len(lines) + 1) for ins, nxt in _pairs(instructions)]
    head_lines = [line for line in lines[: instructions[0].line - 1] if _DIRECTIVE.match(line)]
    head = "".join(f"{line}\n" for line in head_lines) + "".join(spans[:first])
    global_args: dict[str, str] = {}
    for ins in instructions[:first]:
        for name, default in key_values(ins.args, "ARG", ins.line):
            global_args[name] = build_args.get(name, expand(default, global_args))
    words = split_words(expand(instructions[first].args, global_args))
    if not words:
        return None
    shared: list[SharedStep] = []
    stage_args = ""
    body = ""
    start = first + 1
    for index in range(first + 1, len(instructions)):
        ins = instructions[index]
        if ins.keyword in ("COPY", "ADD", "ONBUILD", "FROM") or ins.flags:
            break
        body += spans[index]
        if ins.keyword == "RUN":
            shared.append(SharedStep(body, stage_args, step_text(ins.source)))
            stage_args += "".join(spans[j] for j in range(start, index) if instructions[j].keyword == "ARG")
            body, start = "", index + 1
    if not shared:
        return None
    rest = "".join(spans[start:])
    rest_steps = instructions[start:]
    # Name the rest after its first step that does work (usually the COPY of the task's files).
    main = next((ins for ins in rest_steps if ins.keyword in ("COPY", "ADD", "RUN", "WORKDIR")), None)
    main = main or (rest_steps[0] if rest_steps else None)
    rest_label = step_text(main.source) if main is not None else "(image config)"
    if len(rest_steps) > 1:
        rest_label += f" (+{len(rest_steps) - 1} more)"
    return LayerPlan(head, words[0], tuple(shared), rest, stage_args, rest_label)


def _pairs(items: list[Any]) -> Iterator[tuple[Any, Any]]:
    for i, item in enumerate(items):
        yield item, items[i + 1] if i + 1 < len(items) else None


def _span(lines: list[str], start: int, stop: int) -> str:
    """An instruction's lines (1-based ``start`` to ``stop``), without trailing comments and blanks."""
    chunk = lines[start - 1 : stop - 1]
    while len(chunk) > 1 and (not chunk[-1].strip() or chunk[-1].lstrip().startswith("#")):
        chunk.pop()
    return "".join(f"{line}\n" for line in chunk)


def _sha(*parts: str) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def _walk(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        here = Path(dirpath)
        yield from (here / name for name in sorted(filenames))
        yield from (here / name for name in dirnames if (here / name).is_symlink())
