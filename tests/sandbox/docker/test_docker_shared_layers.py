"""The docker backend builds a Dockerfile prefix shared by concurrent tasks once, and reports progress."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from docker_engine_kit import BASE_IMAGE, Engine

from ares.images.progress import BuildEvent, build_listener
from ares.sandbox import ImageSpec, SandboxSpec
from ares.sandbox.docker import DockerConfig, DockerSandboxFactory
from ares.sandbox.docker.dockerfiles import plan_layers
from ares.sandbox.docker.images import LAYER_LABEL


@pytest.fixture
def cleanup(docker_client: docker.DockerClient) -> Iterator[list[str]]:
    """Tags a test made (final images first, then layers); removed afterwards."""
    tags: list[str] = []
    yield tags
    for tag in tags:
        with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
            docker_client.api.remove_image(tag, force=True)


def _task_dirs(root: Path, shared: str, names: list[str]) -> list[Path]:
    dirs = []
    for name in names:
        context = root / name / "environment"
        context.mkdir(parents=True)
        (context / "own.txt").write_text(name)
        (context / "Dockerfile").write_text(f"{shared}COPY own.txt /own.txt\nWORKDIR /work\n")
        dirs.append(context)
    return dirs


async def test_concurrent_tasks_build_their_shared_steps_once(
    docker_engine: Engine, docker_client: docker.DockerClient, tmp_path: Path, cleanup: list[str]
) -> None:
    marker = secrets.token_hex(8)
    # Two shared RUN steps (a slow one, like a pip install), then each task's own files.
    shared = (
        f"FROM {BASE_IMAGE}\nARG GREETING=hi\nENV SHARED={marker}\n"
        f'RUN sleep 2 && echo "$GREETING $SHARED $(date +%s%N)" > /shared\n'
        "RUN echo second > /second\n"
    )
    contexts = _task_dirs(tmp_path, shared, ["task-a", "task-b", "task-c"])
    factory = DockerSandboxFactory(DockerConfig(base_url=docker_engine.base_url))
    events: list[BuildEvent] = []
    with build_listener(events.append):
        sandboxes = [factory(SandboxSpec(image=ImageSpec(dockerfile_dir=c))) for c in contexts]
        try:
            await asyncio.gather(*(sb.start() for sb in sandboxes))  # --concurrency 3
            resolver = await factory.engine.images()
            cleanup.extend([*factory.built, *resolver.layers_built])
            contents = {await sb.read_file("/shared") for sb in sandboxes}
            own = [await sb.read_file("/own.txt") for sb in sandboxes]
            env = [(await sb.exec("echo $SHARED")).stdout for sb in sandboxes]
        finally:
            for sb in sandboxes:
                await sb.stop()
    factory.close()
    assert len(contents) == 1 and marker in contents.pop().decode()  # one layer, built once
    assert own == [b"task-a", b"task-b", b"task-c"] and env == [f"{marker}\n"] * 3
    assert {docker_client.api.inspect_image(t)["Config"]["WorkingDir"] for t in resolver.built} == {"/work"}
    assert len(resolver.built) == 3 and len(resolver.layers_built) == 2
    # The engine agrees: each task's filesystem layers start with those of the shared layer images.
    for tag in resolver.layers_built:
        layer = docker_client.api.inspect_image(tag)
        assert layer["Config"]["Labels"][LAYER_LABEL]
        shared_layers = layer["RootFS"]["Layers"]
        for final in resolver.built:
            assert (
                docker_client.api.inspect_image(final)["RootFS"]["Layers"][: len(shared_layers)]
                == shared_layers
            )
    # Events: each shared step is "done" for one image and "cached" for the two others.
    for label in ("RUN sleep 2", "RUN echo second"):
        states = [e.state for e in events if e.step and e.step.startswith(label) and e.state != "building"]
        assert sorted(states) == ["cached", "cached", "done"], (label, states)
    finished = [e for e in events if e.finished]
    assert len(finished) == 3 and {e.state for e in finished} == {"done"}
    assert all(e.total == 3 and e.elapsed_s > 0 for e in finished)
    assert sorted(e.image for e in finished) == [
        "task-a-environment",
        "task-b-environment",
        "task-c-environment",
    ]

    # Another factory (another run) finds the final images: one "cached" event each, nothing built.
    again: list[BuildEvent] = []
    other = DockerSandboxFactory(DockerConfig(base_url=docker_engine.base_url))
    with build_listener(again.append):
        async with other(SandboxSpec(image=ImageSpec(dockerfile_dir=contexts[0]))):
            pass
    other.close()
    assert other.built == [] and [(e.step, e.state) for e in again] == [(None, "cached")]


async def test_a_failing_shared_step_is_reported_and_raised(
    docker_engine: Engine, tmp_path: Path, cleanup: list[str]
) -> None:
    marker = secrets.token_hex(8)
    shared = f"FROM {BASE_IMAGE}\nRUN echo {marker} && exit 7\n"
    (context,) = _task_dirs(tmp_path, shared, ["bad"])
    factory = DockerSandboxFactory(DockerConfig(base_url=docker_engine.base_url))
    events: list[BuildEvent] = []
    with build_listener(events.append), pytest.raises(Exception, match=marker):
        await factory(SandboxSpec(image=ImageSpec(dockerfile_dir=context))).start()
    factory.close()
    assert [(e.step is None, e.state) for e in events[-2:]] == [(False, "failed"), (True, "failed")]
    assert events[-2].step == f"RUN echo {marker} && exit 7"


def test_plan_layers_splits_before_the_first_copy_and_keeps_args() -> None:
    text = (
        "# escape=\\\nARG PY=3.11\nFROM python:${PY}-slim\nARG V=1\n"
        "RUN apt-get update \\\n && apt-get install -y git\n\n# a comment\n"
        "ENV X=1\nRUN pip install pytest==$V\nLABEL a=b\nCOPY . /app\nRUN make\n"
    )
    plan = plan_layers(text, {"PY": "3.12"})
    assert plan is not None and plan.base == "python:3.12-slim"
    assert plan.head == "# escape=\\\nARG PY=3.11\n"
    assert [s.label for s in plan.shared] == [
        "RUN apt-get update && apt-get install -y git",
        "RUN pip install pytest==$V",
    ]
    assert plan.shared[0].body == "ARG V=1\nRUN apt-get update \\\n && apt-get install -y git\n"
    assert plan.shared[1].args == "ARG V=1\n"  # declared again after FROM <first layer>
    rest = plan.dockerfile("ares-layer:x", plan.rest_args, plan.rest)
    assert rest == "# escape=\\\nARG PY=3.11\nFROM ares-layer:x\nARG V=1\nLABEL a=b\nCOPY . /app\nRUN make\n"
    assert plan.rest_label == "COPY . /app (+2 more)"
    keys = plan.keys("sha256:base", {})
    assert len(set(keys)) == 2
    assert plan.keys("sha256:other-base", {}) != keys and plan.keys("sha256:base", {"V": "2"}) != keys
    # Comments and blank lines between steps do not change the keys; the steps' text does.
    assert plan_layers(text.replace("\n# a comment\n", "\n"), {"PY": "3.12"}).keys("sha256:base", {}) == keys  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "text",
    [
        "FROM a AS build\nRUN make\nFROM b\nCOPY --from=build /x /x\n",  # several stages
        "FROM a\nCOPY . /app\nRUN make\n",  # nothing before the first COPY to share
        "FROM a\nRUN --mount=type=cache,target=/c make\nCOPY . /app\n",  # flags (BuildKit) on a shared step
        "FROM --platform=linux/amd64 a\nRUN make\n",
        "FROM a\nONBUILD RUN x\nRUN make\n",  # ONBUILD before any RUN: nothing shared
        "FROM a\nRUN unterminated <<EOF\n",  # not parseable: the engine reports it
    ],
)
def test_plan_layers_leaves_other_dockerfiles_whole(text: str) -> None:
    assert plan_layers(text, {}) is None
