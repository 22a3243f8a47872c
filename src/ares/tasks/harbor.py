"""Load Harbor-format task directories (task.toml, instruction.md, tests/, solution/, environment/).

Validation is strict and eager: a malformed task fails at load time with a message naming the file,
the field and the fix, rather than mid-episode inside a sandbox. An unknown table or key (often a
typo: ``[agnet]``) still loads, as Harbor lets newer task files load, but is reported as a
``TaskConfigWarning`` naming the nearest known name. The known names are the ones this loader reads:
each ``_Section`` records the keys it is asked for, so the check cannot drift from the reading.
"""

from __future__ import annotations

import difflib
import posixpath
import re
import tomllib
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ares.errors import TaskConfigWarning, TaskError, TaskNotFoundError
from ares.sandbox.base import IMAGE_WORKDIR, ImageSpec, Resources, SeccompPolicy
from ares.tasks.model import VERIFIER_MODES, Task, VerifierMode

_DEFAULTS = Task(id="defaults", instruction="", tests={})

#: network_mode values and whether each lets the sandbox reach the network.
NETWORK_MODES: Mapping[str, bool] = {
    "none": False,
    "no-network": False,
    "public": True,
    "bridge": True,
    "host": True,
}

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT])(?:I?B|I)?\s*$", re.IGNORECASE)
_MB_PER_UNIT = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}


@dataclass(frozen=True)
class _Section:
    """One [table] of task.toml, with typed getters whose errors point at file, table and key; it
    records which keys were asked for (``read``) and its sub-tables, so what nobody read is unknown."""

    file: Path
    name: str
    data: Mapping[str, Any]
    read: set[str] = field(default_factory=set)
    tables: dict[str, _Section] = field(default_factory=dict)
    #: Free-form (``[metadata]``): any key is known.
    free: bool = False

    def error(self, key: str, problem: str, fix: str) -> TaskError:
        where = f"[{self.name}] {key}" if self.name else key
        return TaskError(f"{self.file}: {where} {problem}; {fix}")

    def got(self, key: str) -> str:
        value = self.data[key]
        return f"got {value!r} ({type(value).__name__})"

    def get(self, key: str, default: Any = None) -> Any:
        """The raw value of ``key`` (``default`` if absent); every read goes through here."""
        self.read.add(key)
        return self.data.get(key, default)

    def has(self, key: str) -> bool:
        self.read.add(key)
        return key in self.data

    def table(self, key: str, *, free: bool = False) -> _Section:
        """The sub-table ``[name.key]`` (the same one each time it is asked for)."""
        if key in self.tables:
            return self.tables[key]
        value = self.get(key, {})
        name = self._full(key)
        if not isinstance(value, dict):
            raise TaskError(
                f"{self.file}: [{name}] must be a table, {self.got(key)}; write it as a `[{name}]` section"
            )
        section = self.tables[key] = _Section(self.file, name, value, free=free)
        return section

    def string(self, key: str) -> str | None:
        value = self.get(key)
        if value is None or isinstance(value, str):
            return value
        raise self.error(key, f"must be a string, {self.got(key)}", f'quote it, e.g. {key} = "..."')

    def boolean(self, key: str) -> bool | None:
        value = self.get(key)
        if value is None or isinstance(value, bool):
            return value
        raise self.error(key, f"must be true or false, {self.got(key)}", f"write {key} = true or false")

    def positive(self, key: str, unit: str, example: str) -> float | None:
        value = self.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise self.error(
                key, f"must be a positive number of {unit}, {self.got(key)}", f"write e.g. {key} = {example}"
            )
        return float(value)

    def ignore(self, *keys: str) -> None:
        """Keys Harbor defines that have no effect here: known, so not reported, but not used."""
        self.read.update(keys)

    def unknown(self) -> Iterator[str]:
        """What this table holds that the loader did not read, each with the nearest known name."""
        if self.free:
            return
        for key, value in self.data.items():
            if key in self.tables:
                yield from self.tables[key].unknown()
            elif key not in self.read:
                yield self._unknown(key, isinstance(value, dict))

    def _unknown(self, key: str, is_table: bool) -> str:
        near = difflib.get_close_matches(key, sorted(self.read), n=1)
        hint = ""
        if near:
            shown = f"[{self._full(near[0])}]" if near[0] in self.tables else near[0]
            hint = f" (did you mean {shown}?)"
        if is_table:
            return f"unknown table [{self._full(key)}]{hint}"
        return f"unknown key {key}" + (f" in [{self.name}]" if self.name else "") + hint

    def _full(self, key: str) -> str:
        return f"{self.name}.{key}" if self.name else key

    def str_map(self, key: str) -> dict[str, str]:
        value = self.get(key, {})
        if not isinstance(value, dict):
            raise self.error(key, f"must be a table, {self.got(key)}", f'write {key} = {{ NAME = "value" }}')
        bad = [k for k, v in value.items() if not isinstance(v, str)]
        if bad:
            raise self.error(
                key, f"values must be strings, but {bad} are not", 'quote every value, e.g. PORT = "8080"'
            )
        return dict(value)


def load_harbor_task(path: Path, *, verifier_mode: VerifierMode | None = None) -> Task:
    """Load one Harbor task directory; ``Task.id`` is the directory's name.

    ``verifier_mode`` overrides the task's ``[ares.verifier] mode`` (see ``VerifierMode``).
    """
    root = _existing_dir(Path(path), "Harbor task directory")
    toml_path = root / "task.toml"
    if not toml_path.is_file():
        raise TaskError(
            f"{root} has no task.toml; every Harbor task needs one (it may be empty, "
            'e.g. only `version = "1.0"`), next to instruction.md and tests/test.sh'
        )
    try:
        data = tomllib.loads(toml_path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise TaskError(f"{toml_path}: invalid TOML: {exc}; fix the syntax (see https://toml.io)") from exc

    top = _Section(toml_path, "", data)
    environment = top.table("environment")
    agent = top.table("agent")
    verifier = top.table("verifier")
    metadata = dict(top.table("metadata", free=True).data)
    version = top.string("version")
    if version is not None:
        metadata.setdefault("version", version)

    environment.ignore("build_timeout_sec", "gpus", "gpu_types", "mcp_servers", "skills_dir")
    agent.ignore("user")
    mode, outputs = _verifier_extension(top, verifier_mode)
    agent_timeout = agent.positive("timeout_sec", "seconds", "600.0") or _DEFAULTS.agent_timeout_s
    verifier_timeout = verifier.positive("timeout_sec", "seconds", "300.0") or _DEFAULTS.verifier_timeout_s
    task = Task(
        id=root.name,
        instruction=_instruction(root),
        tests=_tests_dir(root),
        image=_image(root, environment),
        resources=_resources(environment),
        network=_network(environment),
        seccomp=_seccomp(environment),
        workdir=_workdir(root, environment),
        env=environment.str_map("env"),
        agent_timeout_s=agent_timeout,
        command_timeout_s=min(_DEFAULTS.command_timeout_s, agent_timeout),
        verifier_timeout_s=verifier_timeout,
        verifier_env=verifier.str_map("env"),
        verifier_mode=mode,
        outputs=outputs,
        solution=_solution_dir(root),
        solution_file=_solution_file(top),
        source="harbor",
        metadata=metadata,
    )
    for problem in top.unknown():  # after everything was read: what is left, nobody reads
        warnings.warn(TaskConfigWarning(f"task.toml of {task.id}: {problem}"), stacklevel=2)
    return task


def load_harbor_dataset(path: Path, *, verifier_mode: VerifierMode | None = None) -> list[Task]:
    """Load every task dir under ``path`` sorted by name; a task dir itself is a one-task dataset."""
    root = _existing_dir(Path(path), "Harbor dataset directory")
    if _looks_like_task(root):
        return [load_harbor_task(root, verifier_mode=verifier_mode)]
    children = sorted((p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")), key=_name)
    tasks = [
        load_harbor_task(child, verifier_mode=verifier_mode) for child in children if _looks_like_task(child)
    ]
    if not tasks:
        raise TaskNotFoundError(
            f"{root} contains no Harbor task directories; a task dir holds task.toml, instruction.md "
            "and tests/test.sh. Point at the dataset dir that contains the task dirs."
        )
    return tasks


def _name(path: Path) -> str:
    return path.name


def _looks_like_task(path: Path) -> bool:
    # instruction.md alone counts so a task dir that lost its task.toml is reported, not skipped.
    return (path / "task.toml").is_file() or (path / "instruction.md").is_file()


def _existing_dir(path: Path, what: str) -> Path:
    if not path.exists():
        raise TaskError(f"{what} {path} does not exist; check the path")
    if not path.is_dir():
        raise TaskError(f"{what} {path} is not a directory; pass the directory that holds task.toml")
    return path.resolve()


def _instruction(root: Path) -> str:
    path = root / "instruction.md"
    if not path.is_file():
        raise TaskError(f"{path} is missing; write the task's instructions for the agent there")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise TaskError(f"{path} is not valid UTF-8 ({exc}); save it as UTF-8") from exc
    if not text.strip():
        raise TaskError(f"{path} is empty; write the task's instructions for the agent there")
    return text


def _tests_dir(root: Path) -> Path:
    tests = root / "tests"
    if not (tests / "test.sh").is_file():
        raise TaskError(
            f"{tests / 'test.sh'} is missing; every Harbor task needs a tests/test.sh that writes "
            "/logs/verifier/reward.txt (one number) or /logs/verifier/reward.json"
        )
    return tests


def _solution_dir(root: Path) -> Path | None:
    solution = root / "solution"
    if not solution.exists():
        return None
    if not (solution / "solve.sh").is_file():
        raise TaskError(
            f"{solution} has no solve.sh; add the oracle script solution/solve.sh or remove the directory"
        )
    return solution


def _image(root: Path, env: _Section) -> ImageSpec:
    name = env.string("docker_image")
    if name is not None and not name.strip():
        raise env.error("docker_image", "is empty", "name an image (e.g. python:3.11-slim) or drop the key")
    dockerfile_dir = root / "environment"
    has_dockerfile = (dockerfile_dir / "Dockerfile").is_file()
    return ImageSpec(name=name, dockerfile_dir=dockerfile_dir if has_dockerfile else None)


def _resources(env: _Section) -> Resources:
    cpus = env.positive("cpus", "CPUs", "2")
    pids = env.positive("pids_limit", "processes", "256")
    if pids is not None and not pids.is_integer():
        raise env.error("pids_limit", f"must be a whole number, {env.got('pids_limit')}", "write e.g. 256")
    return Resources(
        cpus=cpus,
        memory_mb=_size_mb(env, "memory_mb", "memory"),
        storage_mb=_size_mb(env, "storage_mb", "storage"),
        pids=None if pids is None else int(pids),
    )


def _size_mb(env: _Section, mb_key: str, text_key: str) -> int | None:
    """Read a size given either as ``<mb_key> = 2048`` or ``<text_key> = "2G"``."""
    if env.has(mb_key) and env.has(text_key):
        raise env.error(mb_key, f"and {text_key} are both set", "keep only one of them")
    mb = env.positive(mb_key, "megabytes", "2048")
    if mb is not None:
        return max(1, round(mb))
    text = env.get(text_key)
    if text is None:
        return None
    match = _SIZE.match(text) if isinstance(text, str) else None
    if match is None or float(match.group(1)) <= 0:
        raise env.error(
            text_key,
            f'must be a size string like "512M" or "2G", {env.got(text_key)}',
            f'write e.g. {text_key} = "2G" or use {mb_key} = 2048',
        )
    return max(1, round(float(match.group(1)) * _MB_PER_UNIT[match.group(2).upper()]))


def _network(env: _Section) -> bool:
    mode = env.string("network_mode")
    allow = env.boolean("allow_internet")
    if mode is None:
        return bool(allow)
    allowed = ", ".join(f'"{m}"' for m in NETWORK_MODES)
    network = NETWORK_MODES.get(mode.strip().lower())
    if network is None and mode.strip().lower() == "allowlist":
        raise env.error(
            "network_mode",
            "is 'allowlist', but network allowlists are not supported by the local sandbox (it has either "
            "no network or full user-mode networking)",
            f"use one of {allowed}",
        )
    if network is None:
        raise env.error("network_mode", f"is {mode!r}, which is not supported", f"use one of {allowed}")
    if allow is not None and allow != network:
        raise env.error(
            "network_mode",
            f"= {mode!r} contradicts allow_internet = {str(allow).lower()}",
            "keep only one of the two keys",
        )
    return network


def _seccomp(env: _Section) -> SeccompPolicy:
    """``seccomp = "unconfined"`` drops the syscall filter; ``seccomp_allow = ["perf_event_open"]``
    allows syscalls the default filter denies (ARES extensions to Harbor's [environment])."""
    profile = env.string("seccomp") or "default"
    if profile not in ("default", "unconfined"):
        raise env.error("seccomp", f"is {profile!r}", 'use "default" or "unconfined"')
    allow = env.get("seccomp_allow", [])
    if not isinstance(allow, list) or not all(isinstance(name, str) and name for name in allow):
        raise env.error(
            "seccomp_allow", f"must be a list of syscall names, {env.got('seccomp_allow')}",
            'write e.g. seccomp_allow = ["perf_event_open"]',
        )  # fmt: skip
    return SeccompPolicy(profile=profile, allow=tuple(allow))


def _verifier_extension(top: _Section, override: VerifierMode | None) -> tuple[VerifierMode, tuple[str, ...]]:
    """``[ares.verifier]``: ``mode = "outputs" | "full"`` and ``outputs = ["/app", ...]`` (an ARES
    extension that Harbor ignores). ``override`` (a loader option) wins over the file."""
    section = top.table("ares").table("verifier")
    modes = " or ".join(f'"{m}"' for m in VERIFIER_MODES)
    if override is not None and override not in VERIFIER_MODES:
        raise TaskError(f"verifier_mode={override!r} is not a verifier mode; use {modes}")
    mode = section.string("mode") or "outputs"
    if mode not in VERIFIER_MODES:
        raise section.error("mode", f"is {mode!r}", f"use {modes}")
    raw = section.get("outputs", [])
    if not isinstance(raw, list) or not all(isinstance(p, str) and p.startswith("/") for p in raw):
        raise section.error(
            "outputs", f"must be a list of absolute paths, {section.got('outputs')}",
            'write e.g. outputs = ["/app", "/etc/app.conf"]',
        )  # fmt: skip
    outputs = tuple(posixpath.normpath(p) for p in raw)
    if "/" in outputs:
        raise section.error("outputs", 'includes "/", which is the whole filesystem', 'use mode = "full"')
    return override or mode, outputs  # type: ignore[return-value]


def _solution_file(top: _Section) -> str | None:
    """``[ares.agent] solution_file = "solution.py"``: the file, relative to the workdir, that holds a
    function-level task's answer (an ARES extension for single-turn agents; Harbor ignores it)."""
    section = top.table("ares").table("agent")
    name = section.string("solution_file")
    if name is None:
        return None
    normalized = posixpath.normpath(name.strip()) if name.strip() else ""
    if normalized in ("", ".", "..") or normalized.startswith(("/", "../")):
        raise section.error(
            "solution_file", f"must be a file path relative to the workdir, got {name!r}",
            'write e.g. solution_file = "solution.py"',
        )  # fmt: skip
    return normalized


def _workdir(root: Path, env: _Section) -> str:
    """``workdir`` from task.toml, else the Dockerfile's WORKDIR, else (a prebuilt ``docker_image``
    and no Dockerfile) the image's own working dir, resolved when the sandbox starts."""
    workdir = env.string("workdir")
    if workdir is None:
        dockerfile = root / "environment" / "Dockerfile"
        if env.string("docker_image") and not dockerfile.is_file():
            return IMAGE_WORKDIR
        return _dockerfile_workdir(dockerfile) or _DEFAULTS.workdir
    if not workdir.startswith("/"):
        raise env.error(
            "workdir", f"must be an absolute path, got {workdir!r}", 'write e.g. workdir = "/app"'
        )
    return posixpath.normpath(workdir)


def _dockerfile_workdir(dockerfile: Path) -> str | None:
    """The last WORKDIR of the final build stage, so tasks that only set it there still run in place."""
    if not dockerfile.is_file():
        return None
    current: str | None = None
    for raw in dockerfile.read_text(encoding="utf-8", errors="replace").splitlines():
        words = raw.strip().split(maxsplit=1)
        if not words:
            continue
        keyword = words[0].upper()
        if keyword == "FROM":
            current = None
        elif keyword == "WORKDIR" and len(words) == 2:
            value = words[1].strip().strip("\"'")
            if "$" in value:
                continue  # build-arg substitution cannot be resolved here
            current = posixpath.normpath(posixpath.join(current or "/", value))
    return current
