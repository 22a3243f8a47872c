"""Image dirs: ``FROM [...]/NAME[:TAG]`` builds ``<dir>/NAME/Dockerfile`` on first use, never pulls."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ares.errors import ImageBuildError
from ares.images.build.image_dirs import dockerfile_dir_for
from ares.images.cache import ImageCache
from ares.sandbox.local.images import image_sandbox, local_builder


async def refuse(name: str, **options: Any) -> Any:
    raise AssertionError(f"{name} must not be pulled")


def write(path: Path, text: str) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "Dockerfile").write_text(text)
    return path


def test_a_name_maps_to_the_dir_of_its_last_repository_component(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    write(second / "toolz", "FROM ares/host\n")
    write(first / "click", "FROM ares/host\n")
    dirs = (first, second)
    assert dockerfile_dir_for("ares-swe/toolz:1.2.0", dirs) == second / "toolz"
    assert dockerfile_dir_for("registry:5000/team/toolz@sha256:" + "0" * 64, dirs) == second / "toolz"
    assert dockerfile_dir_for("click", dirs) == first / "click"
    assert dockerfile_dir_for("ares-swe/boltons:26.2.0", dirs) is None
    (tmp_path / "a" / "empty").mkdir()
    assert dockerfile_dir_for("x/empty:1", dirs) is None  # a dir without a Dockerfile provides nothing


async def test_from_a_provided_name_builds_it_first_and_follows_its_edits(tmp_path: Path) -> None:
    images = tmp_path / "images"
    base = write(images / "base", "FROM ares/host\nRUN echo one > /marker\n")
    task = write(images / "instances" / "t1", "FROM ares-test/base:1\nRUN cat /marker > /seen\n")
    cache = ImageCache(tmp_path / "cache")
    builder = local_builder(cache, fallback="off", puller=refuse)

    image = await builder.build(task, image_dirs=(images,))
    assert cache.find("ares-test/base:1") is not None  # the provided image is tagged with the full name
    async with image_sandbox(image) as sandbox:
        assert await sandbox.read_file("/seen") == b"one\n"

    write(base, "FROM ares/host\nRUN echo two > /marker\n")  # the Dockerfile wins over the old tag
    image = await builder.build(task, image_dirs=(images,))
    async with image_sandbox(image) as sandbox:
        assert await sandbox.read_file("/seen") == b"two\n"


async def test_a_provided_image_that_needs_itself_is_a_clear_error(tmp_path: Path) -> None:
    images = tmp_path / "images"
    write(images / "loop", "FROM ares-test/loop:1\n")
    task = write(tmp_path / "task", "FROM ares-test/loop:1\n")
    builder = local_builder(ImageCache(tmp_path / "cache"), fallback="off", puller=refuse)
    with pytest.raises(
        ImageBuildError, match=r"build it from itself \(ares-test/loop:1 -> ares-test/loop:1\)"
    ):
        await builder.build(task, image_dirs=(images,))
