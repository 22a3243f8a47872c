"""The local builder reports progress as BuildEvents (never prints): steps building, done, cached or
failed, with elapsed times, to an explicit hook or to the listener of the calling context."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ares.errors import ImageBuildError
from ares.images.build.standins import host_python_version
from ares.images.cache import ImageCache
from ares.images.progress import BuildEvent, build_listener, current_listener, emit, step_text
from ares.sandbox.local.images import local_builder

PY = ".".join((host_python_version() or "3.11").split(".")[:2])


def context(root: Path, dockerfile: str) -> Path:
    ctx = root / "task-x" / "environment"
    ctx.mkdir(parents=True)
    (ctx / "Dockerfile").write_text(dockerfile)
    (ctx / "app.py").write_text("print(1)\n")
    return ctx


def states(events: list[BuildEvent]) -> list[tuple[str | None, int, str]]:
    return [(e.step, e.index, e.state) for e in events]


async def test_a_build_reports_each_step_then_the_image(tmp_path: Path) -> None:
    ctx = context(
        tmp_path, f"FROM python:{PY}-slim\nENV A=1\nRUN sleep 0.3 && echo hi > /x\nCOPY app.py /app/\n"
    )
    builder = local_builder(ImageCache(tmp_path / "cache"))
    events: list[BuildEvent] = []
    with build_listener(events.append):
        await builder.build(ctx)
    base = "(base setup for ares/host-python)"
    assert states(events) == [
        (None, 0, "building"),
        (base, 1, "building"),
        (base, 1, "done"),
        (f"FROM python:{PY}-slim", 1, "cached"),
        ("ENV A=1", 2, "cached"),
        ("RUN sleep 0.3 && echo hi > /x", 3, "building"),
        ("RUN sleep 0.3 && echo hi > /x", 3, "done"),
        ("COPY app.py /app/", 4, "building"),
        ("COPY app.py /app/", 4, "done"),
        (None, 4, "done"),
    ]
    assert {e.image for e in events} == {"task-x-environment"} and {e.total for e in events} == {4}
    run_done = events[6]
    assert run_done.elapsed_s >= 0.3 and run_done.describe().startswith(
        "task-x-environment step 3/4 RUN sleep 0.3 && echo hi > /x: done in "
    )
    image = events[-1]
    assert image.finished and (image.built, image.cached) == (3, 1) and image.elapsed_s >= 0.3

    # Rebuilt: every step from the cache, and the image says so.
    again: list[BuildEvent] = []
    with build_listener(again.append):
        await builder.build(ctx)
    assert [e.state for e in again if e.step] == ["cached"] * 5
    assert again[-1].state == "cached" and (again[-1].built, again[-1].cached) == (0, 4)
    assert again[-1].describe().startswith("task-x-environment: ready in ")


async def test_a_failing_step_is_reported_failed_before_the_error_propagates(tmp_path: Path) -> None:
    ctx = context(tmp_path, f"FROM python:{PY}-slim\nRUN echo no && exit 3\n")
    events: list[BuildEvent] = []
    builder = local_builder(ImageCache(tmp_path / "cache"), on_event=events.append)  # explicit hook
    with pytest.raises(ImageBuildError):
        await builder.build(ctx)
    assert states(events)[-3:] == [
        ("RUN echo no && exit 3", 2, "building"),
        ("RUN echo no && exit 3", 2, "failed"),
        (None, 1, "failed"),
    ]
    assert events[-1].describe().startswith("task-x-environment: FAILED in ")


async def test_listeners_follow_the_context_into_tasks_and_never_break_a_build(tmp_path: Path) -> None:
    ctx = context(tmp_path, f"FROM python:{PY}-slim\nWORKDIR /w\n")
    builder = local_builder(ImageCache(tmp_path / "cache"))
    seen: list[str] = []

    def broken(event: BuildEvent) -> None:
        seen.append(event.state)
        raise RuntimeError("a display bug")

    with build_listener(broken):
        # A task created inside the block (as the runner's workers are) reports to the listener.
        image = await asyncio.get_running_loop().create_task(builder.build(ctx))
    assert image.config.workdir == "/w" and seen[-1] == "done"
    assert current_listener() is None
    emit(None, seen and BuildEvent("x", None, 0, 1, "building"))  # no listener: nothing happens


def test_step_text_is_one_short_line() -> None:
    assert step_text("RUN a \\\n  && b") == "RUN a \\ ..."
    assert step_text("RUN  apt-get   install x") == "RUN apt-get install x"
    assert len(step_text("RUN " + "x" * 500)) == 120
