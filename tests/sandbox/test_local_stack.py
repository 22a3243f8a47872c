"""The local sandbox's layer stack (stack.py): the image, its snapshot layers and their plan agree."""

from __future__ import annotations

from pathlib import Path

import pytest

from ares.errors import SandboxError
from ares.images.rootfs import OverlayMount, RootfsPlan
from ares.sandbox.local.stack import LayerStack, stacked

IMAGE = RootfsPlan((OverlayMount("/", ("/base",)),))


def layer(tmp_path: Path, name: str) -> Path:
    (tmp_path / name / "_root").mkdir(parents=True)
    return tmp_path / name


def test_the_first_start_pins_the_image() -> None:
    stack = LayerStack(None)
    assert (stack.plan, stack.image) == (None, None)
    with pytest.raises(SandboxError):
        stack.pin()
    assert stack.pin(IMAGE) == IMAGE == stack.plan == stack.image


def test_pushed_layers_stack_topmost_first_and_reset_lets_go(tmp_path: Path) -> None:
    stack = LayerStack(IMAGE)
    stack.pin()
    first, second = layer(tmp_path, "a"), layer(tmp_path, "b")
    stack.push(first)
    stack.push(second)
    assert stack.layers == (second, first)
    assert stack.plan == stacked(IMAGE, (second, first))
    assert stack.plan is not None and stack.plan.mounts[0].lower == (
        str(second / "_root"),
        str(first / "_root"),
        "/base",
    )
    assert stack.reset() == (second, first)
    assert (stack.layers, stack.plan, stack.image) == ((), IMAGE, IMAGE)


def test_layers_need_a_pinned_image(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="not been started"):
        LayerStack(IMAGE).attach((layer(tmp_path, "a"),))
