"""Image progress as events: build steps (``BuildEvent``) and pulled layers (``PullEvent``).

Builders (the local one and the docker backend's) never print. They report ``BuildEvent``s to a
listener: the one passed to them explicitly, else the one installed for the current context with
``build_listener(...)`` (a ``contextvars`` variable, so asyncio tasks started inside the ``with``
block, and the builds they trigger, report to it). ``ares run`` installs a listener that feeds its
progress display, or prints plain lines when output is not a terminal.

Listeners may be called from worker threads (the docker SDK is blocking) and must be quick and
thread-safe. An exception raised by a listener is logged and otherwise ignored: progress reporting
never fails a build.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

BuildState = Literal["building", "cached", "done", "failed"]

_log = logging.getLogger(__name__)
#: Longest step text an event carries (Dockerfile steps can be pages long).
STEP_CHARS = 120


@dataclass(frozen=True, slots=True)
class BuildEvent:
    """One change in a build.

    ``step`` is the instruction (first line, shortened); None when the event is about the whole
    image: ``building`` when its build starts, then ``done`` (something was built), ``cached``
    (every step came from the cache) or ``failed``. ``index`` is the 1-based step number out of
    ``total`` (for image events: the steps finished so far). ``elapsed_s`` is the step's (or the
    image's) time so far: 0.0 when it starts building. ``built``/``cached`` count the image's steps
    so far (image events only).
    """

    image: str
    step: str | None
    index: int
    total: int
    state: BuildState
    elapsed_s: float = 0.0
    built: int = 0
    cached: int = 0

    @property
    def finished(self) -> bool:
        """Whether this is the last event of its image (its build succeeded, was cached or failed)."""
        return self.step is None and self.state != "building"

    def describe(self) -> str:
        """One plain line, e.g. ``task-env step 2/4 RUN pip install pytest: done in 61.2s``."""
        if self.step is None:
            if self.state == "building":
                return f"{self.image}: building ({self.total} steps)"
            counts = f"{self.cached} cached, {self.built} built"
            word = {"done": "built", "cached": "ready", "failed": "FAILED"}[self.state]
            return f"{self.image}: {word} in {self.elapsed_s:.1f}s ({counts})"
        head = f"{self.image} step {self.index}/{self.total} {self.step}"
        if self.state == "building":
            return f"{head}: building"
        if self.state == "cached":
            return f"{head}: cached"
        return f"{head}: {'done' if self.state == 'done' else 'FAILED'} in {self.elapsed_s:.1f}s"


PullState = Literal["resolving", "downloading", "extracting", "done", "cached", "failed", "substituted"]


@dataclass(frozen=True, slots=True)
class PullEvent:
    """One change in a pull.

    ``layer`` is the blob digest, or None for an event about the whole image: ``resolving`` when it
    starts, then ``done`` (something was downloaded), ``cached`` (nothing was) or ``failed``; or
    ``substituted`` alone: no registry in reach, a stand-in serves the image (``message`` says which).
    ``done``/``total`` are stored (compressed) bytes: of the layer, or of the whole image for image
    events (``total`` None when unknown). ``layers``/``downloaded`` count the image's layers and how
    many of them were downloaded (image events only).
    """

    image: str
    layer: str | None
    state: PullState
    done: int = 0
    total: int | None = None
    layers: int = 0
    downloaded: int = 0
    elapsed_s: float = 0.0
    message: str = ""

    @property
    def finished(self) -> bool:
        """Whether this is the last event of its image."""
        return self.layer is None and self.state in ("done", "cached", "failed", "substituted")

    def describe(self) -> str:
        """One plain line, e.g. ``debian:12 layer 1a2b3c4d5e6f: done 29.1/29.1 MB``."""
        size = f"{_mb(self.done)}/{_mb(self.total)} MB" if self.total is not None else f"{_mb(self.done)} MB"
        if self.layer is None:
            if self.state == "resolving":
                return f"{self.image}: resolving"
            if self.state == "failed":
                return f"{self.image}: pull FAILED{': ' + self.message if self.message else ''}"
            if self.state == "substituted":
                return f"{self.image}: {self.message}"
            word = "pulled" if self.state == "done" else "up to date"
            return (
                f"{self.image}: {word} in {self.elapsed_s:.1f}s ({self.layers} layers, "
                f"{self.downloaded} downloaded, {_mb(self.done)} MB moved)"
            )
        return f"{self.image} layer {self.layer.removeprefix('sha256:')[:12]}: {self.state} {size}"


def _mb(value: int | None) -> str:
    return f"{(value or 0) / 1e6:.1f}"


ImageEvent = BuildEvent | PullEvent
#: Receives build and pull events (check the type: ``isinstance(event, PullEvent)``).
ImageListener = Callable[[ImageEvent], None]
BuildListener = ImageListener

_listener: ContextVar[BuildListener | None] = ContextVar("ares_build_listener", default=None)


@contextlib.contextmanager
def build_listener(listener: BuildListener | None) -> Iterator[None]:
    """Report the builds started in this context (and tasks created in it) to ``listener``."""
    token = _listener.set(listener)
    try:
        yield
    finally:
        _listener.reset(token)


def current_listener() -> BuildListener | None:
    """The listener installed for the current context, if any."""
    return _listener.get()


def step_text(text: str) -> str:
    """An instruction as an event shows it: its first line, at most ``STEP_CHARS`` characters."""
    lines = text.strip().splitlines()
    first = " ".join(lines[0].split()) if lines else ""
    if len(lines) > 1:
        first += " ..."
    return first if len(first) <= STEP_CHARS else first[: STEP_CHARS - 3] + "..."


def context_label(context_dir: Path) -> str:
    """``task-environment``: a readable name for a Harbor task's build context (events and logs)."""
    return f"{context_dir.absolute().parent.name}-{context_dir.name}"


def emit(listener: BuildListener | None, event: ImageEvent) -> None:
    """Give ``event`` to ``listener`` (if any); a failing listener is logged, never raised."""
    if listener is None:
        return
    try:
        listener(event)
    except Exception:
        _log.exception("build progress listener %r failed on %s", listener, event)
