"""A Task as plain JSON, so that a saved snapshot can be restored where its dataset is not loaded.

Host paths (tests, solution or Dockerfile directories) are kept as paths: a snapshot restored on
another machine needs the same dataset checkout, or a task given by the caller.
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ares.sandbox.base import ImageSpec, Resources, SeccompPolicy
from ares.tasks.model import Task


def task_to_json(task: Task) -> dict[str, Any]:
    return {
        "id": task.id,
        "instruction": task.instruction,
        "tests": _files_to_json(task.tests),
        "image": {
            "name": task.image.name,
            "dockerfile_dir": None if task.image.dockerfile_dir is None else str(task.image.dockerfile_dir),
            "image_dirs": [str(path) for path in task.image.image_dirs],
        },
        "resources": dataclasses.asdict(task.resources),
        "network": task.network,
        "seccomp": {"profile": task.seccomp.profile, "allow": list(task.seccomp.allow)},
        "workdir": task.workdir,
        "env": dict(task.env),
        "agent_timeout_s": task.agent_timeout_s,
        "command_timeout_s": task.command_timeout_s,
        "verifier_timeout_s": task.verifier_timeout_s,
        "verifier_env": dict(task.verifier_env),
        "verifier_mode": task.verifier_mode,
        "outputs": list(task.outputs),
        "workspace": _files_to_json(task.workspace),
        "solution": None if task.solution is None else _files_to_json(task.solution),
        "solution_file": task.solution_file,
        "source": task.source,
        "metadata": dict(task.metadata),
    }


def task_from_json(data: Mapping[str, Any]) -> Task:
    image, resources, seccomp = data["image"], data["resources"], data["seccomp"]
    return Task(
        id=str(data["id"]),
        instruction=str(data["instruction"]),
        tests=_files_from_json(data["tests"]),
        image=ImageSpec(
            name=image.get("name"),
            dockerfile_dir=None if image.get("dockerfile_dir") is None else Path(image["dockerfile_dir"]),
            image_dirs=tuple(Path(path) for path in image.get("image_dirs") or ()),
        ),
        resources=Resources(**resources),
        network=bool(data["network"]),
        seccomp=SeccompPolicy(profile=seccomp["profile"], allow=tuple(seccomp["allow"])),
        workdir=str(data["workdir"]),
        env=dict(data["env"]),
        agent_timeout_s=float(data["agent_timeout_s"]),
        command_timeout_s=float(data["command_timeout_s"]),
        verifier_timeout_s=float(data["verifier_timeout_s"]),
        verifier_env=dict(data["verifier_env"]),
        verifier_mode=data["verifier_mode"],
        outputs=tuple(data["outputs"]),
        workspace=_files_from_json(data["workspace"]),  # type: ignore[arg-type]
        solution=None if data.get("solution") is None else _files_from_json(data["solution"]),
        solution_file=data.get("solution_file"),
        source=str(data.get("source", "")),
        metadata=dict(data.get("metadata") or {}),
    )


def _files_to_json(files: Path | Mapping[str, bytes | str]) -> dict[str, Any]:
    if isinstance(files, Path):
        return {"path": str(files)}
    return {
        "files": {
            name: {"b64": base64.b64encode(content).decode()} if isinstance(content, bytes) else content
            for name, content in files.items()
        }
    }


def _files_from_json(data: Mapping[str, Any]) -> Path | dict[str, bytes | str]:
    if "path" in data:
        return Path(data["path"])
    return {
        name: base64.b64decode(content["b64"]) if isinstance(content, Mapping) else str(content)
        for name, content in data["files"].items()
    }
