"""What ``ares run`` shows while it runs: episodes done, errors as they first appear, image builds and pulls.

On a terminal: a live display (an episodes bar and one row per image being built). Otherwise (output
redirected to a file or a CI log): plain lines, flushed as they are written, so the log shows
progress while the run goes on. A line per ``every`` finished episodes or ``interval_s`` seconds,
a line per build step that runs (and per image built or found), the first episode of each distinct
error, and a heartbeat naming what is still building when nothing else was said for a while.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol, Self

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Column
from rich.text import Text

from ares.errors import clip_error
from ares.images.progress import ImageEvent, PullEvent
from ares.rollout.results import EpisodeResult

#: Distinct errors announced while the run goes on (all of them are in the summary).
MAX_ANNOUNCED_ERRORS = 5
_MESSAGE_CHARS = 200


class RunProgress(Protocol):
    def __enter__(self) -> Self: ...

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...

    def on_result(self, result: EpisodeResult, label: str | None = None) -> None: ...

    def on_build(self, event: ImageEvent) -> None: ...


def run_progress(
    console: Console, total: int, earlier: Iterable[EpisodeResult] = (), *, labels: Sequence[str] = ()
) -> RunProgress:
    """The live display on a terminal, plain lines otherwise. With ``labels`` (e.g. the policies of
    ``ares tasks validate``), results come with one of them and are counted apart, in that order."""
    tally = _Tally(total, earlier, labels)
    if console.is_terminal:
        return LiveProgress(console, tally)
    return PlainProgress(console, tally)


@dataclass
class _Count:
    """The episodes of one label (e.g. one policy): how many ended, passed, errored."""

    done: int = 0
    passed: int = 0
    errored: int = 0

    def describe(self, label: str) -> str:
        text = f"{label} {self.passed}/{self.done} passed"
        return f"{text} ({self.errored} errored)" if self.errored else text


class _Tally:
    """Counts of the finished episodes; reward means over the scored (not errored) ones. With
    labels, each label is counted apart (the rewards of different policies do not mix)."""

    def __init__(self, total: int, earlier: Iterable[EpisodeResult], labels: Sequence[str] = ()) -> None:
        self.total = total
        self.started = time.monotonic()
        self.done = self.passed = self.errored = 0
        self.reward_sum = 0.0
        self.by_label = {label: _Count() for label in labels}
        self._errors: set[tuple[str, str]] = set()
        for result in earlier:
            self.add(result)

    def add(self, result: EpisodeResult, label: str | None = None) -> str | None:
        """Count ``result`` (under ``label``); returns a line announcing its error if that error is new."""
        self.done += 1
        if label is not None:
            count = self.by_label.setdefault(label, _Count())
            count.done += 1
            count.errored += result.errored
            count.passed += result.passed
        if result.errored:
            self.errored += 1
            error = result.error or {}
            kind, message = str(error.get("type") or "error"), str(error.get("message") or "")
            first_line = message.strip().splitlines()[0] if message.strip() else "(no message)"
            if (kind, first_line) in self._errors or len(self._errors) >= MAX_ANNOUNCED_ERRORS:
                return None
            self._errors.add((kind, first_line))
            shown = clip_error(first_line, _MESSAGE_CHARS)  # the problem's middle goes, never its remedy
            return f"episode {result.index} ({result.task_id}) errored: {kind}: {shown}"
        self.passed += result.passed
        self.reward_sum += result.reward or 0.0
        return None

    def describe(self) -> str:
        if self.by_label:
            return " · ".join(count.describe(label) for label, count in self.by_label.items())
        scored = self.done - self.errored
        mean = f"{self.reward_sum / scored:.3f}" if scored else "-"
        text = f"pass {self.passed}/{scored}  mean reward {mean}"
        return f"{text}  errored {self.errored}" if self.errored else text


class LiveProgress:
    """A Rich display: the episodes bar, and a row per image while it builds."""

    def __init__(self, console: Console, tally: _Tally) -> None:
        self.tally = tally
        kind = Column(no_wrap=True, min_width=8)
        self.progress = Progress(
            TextColumn("{task.fields[kind]}", style="bold", markup=False, table_column=kind),
            BarColumn(bar_width=24), MofNCompleteColumn(table_column=Column(no_wrap=True, min_width=7)),
            TextColumn("{task.description}", markup=False, table_column=Column(no_wrap=True, ratio=1)),
            TimeElapsedColumn(), console=console, transient=False, expand=True,
        )  # fmt: skip
        self.bar = self.progress.add_task(
            tally.describe() if tally.done else "", total=tally.total, completed=tally.done, kind="episodes"
        )
        self._builds: dict[str, TaskID] = {}
        self._pulls: dict[str, dict[str, tuple[int, int | None]]] = {}  # image -> layer -> (done, total)
        self._lock = threading.Lock()

    def __enter__(self) -> Self:
        self.progress.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.progress.stop()

    def on_result(self, result: EpisodeResult, label: str | None = None) -> None:
        announce = self.tally.add(result, label)
        if announce is not None:
            self.progress.console.print(Text(announce, style="red"))
        self.progress.update(self.bar, completed=self.tally.done, description=self.tally.describe())

    def on_build(self, event: ImageEvent) -> None:
        if isinstance(event, PullEvent):
            with self._lock:
                self._on_pull(event)
            return
        with self._lock:  # docker builds report from their own threads
            row = self._builds.get(event.image)
            if event.finished:
                if row is not None:
                    self.progress.remove_task(row)
                    del self._builds[event.image]
                if event.state != "cached":  # images found ready are not news
                    style = "red" if event.state == "failed" else "green"
                    self.progress.console.print(Text(f"image {event.describe()}", style=style))
                return
            if row is None:
                row = self.progress.add_task(event.image, total=max(event.total, 1), kind="build")
                self._builds[event.image] = row
            name = event.image.removesuffix("-environment")  # Harbor build contexts: the task's name
            if event.step is None:
                self.progress.update(row, description=f"{name}: starting")
                return
            # The M/N column counts the steps; the description says which one runs, or how it ended.
            completed = event.index - 1 if event.state == "building" else event.index
            description = f"{name}: {event.step}" + ("" if event.state == "building" else f" ({event.state})")
            self.progress.update(row, total=max(event.total, 1), completed=completed, description=description)

    def _on_pull(self, event: PullEvent) -> None:
        """One row per image being pulled: bytes of its layers so far, layers finished."""
        key = f"pull:{event.image}"
        row = self._builds.get(key)
        if event.finished:
            if row is not None:
                self.progress.remove_task(row)
                del self._builds[key]
                self._pulls.pop(event.image, None)
            if event.state != "cached":
                style = {"failed": "red", "substituted": "yellow"}.get(event.state, "green")
                self.progress.console.print(Text(f"image {event.describe()}", style=style))
            return
        if row is None:
            row = self.progress.add_task(event.image, total=None, kind="pull")
            self._builds[key] = row
        layers = self._pulls.setdefault(event.image, {})
        if event.layer is not None:
            layers[event.layer] = (event.done, event.total)
        totals = [total for _, total in layers.values()]
        total = sum(t for t in totals if t is not None) if totals and None not in totals else None
        finished = sum(1 for (done, t) in layers.values() if t is not None and done >= t)
        self.progress.update(
            row, completed=sum(done for done, _ in layers.values()), total=total,
            description=f"{event.image}: {finished}/{len(layers)} layers",
        )  # fmt: skip


class PlainProgress:
    """Plain lines for logs: progress every ``every`` episodes or ``interval_s``, builds, errors."""

    def __init__(
        self, console: Console, tally: _Tally, *, interval_s: float = 5.0, heartbeat_s: float = 30.0
    ) -> None:
        self.console = console
        self.tally = tally
        self.every = max(1, tally.total // 10)
        self.interval_s = interval_s
        self.heartbeat_s = heartbeat_s
        self._last_line = time.monotonic()
        self._last_done = tally.done
        self._building: dict[str, tuple[str, float]] = {}  # image -> (current step, since)
        self._announced: set[tuple[str, int, str | None]] = set()  # steps said to be building
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._heartbeat, name="ares-progress", daemon=True)

    def __enter__(self) -> Self:
        self._say(
            f"running {self.tally.total} episodes"
            + (f" ({self.tally.done} done before)" if self.tally.done else "")
        )
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=1.0)

    def on_result(self, result: EpisodeResult, label: str | None = None) -> None:
        announce = self.tally.add(result, label)
        if announce is not None:
            self._say(announce)
        done = self.tally.done
        now = time.monotonic()
        if (
            done >= self.tally.total
            or done - self._last_done >= self.every
            or now - self._last_line >= self.interval_s
        ):
            self._last_done = done
            self._say(self._status())

    def on_build(self, event: ImageEvent) -> None:
        if isinstance(event, PullEvent):
            self._on_pull(event)
            return
        step = (event.image, event.index, event.step)
        with self._lock:
            if event.finished:
                self._building.pop(event.image, None)
            elif event.step is not None and event.state == "building":
                self._building[event.image] = (
                    f"step {event.index}/{event.total} {event.step}",
                    time.monotonic(),
                )
                self._announced.add(step)
            elif event.step is not None:
                self._building.pop(event.image, None)
            announced = step in self._announced
        if event.step is None and event.state == "building":
            return  # the steps that run say it
        if event.step is not None and event.state == "cached" and not announced:
            return  # the image's line counts them; said only if it was waited for (built by another task)
        self._say(f"image {event.describe()}")

    def _on_pull(self, event: PullEvent) -> None:
        """Lines when a layer is done or failed and when the image is; the heartbeat names pulls."""
        with self._lock:
            if event.finished:
                self._building.pop(f"pull {event.image}", None)
            elif event.layer is None:
                self._building[f"pull {event.image}"] = ("pulling", time.monotonic())
        image_over = event.finished and event.state != "cached"
        if image_over or (event.layer is not None and event.state in ("done", "failed")):
            self._say(f"image {event.describe()}")

    def _status(self) -> str:
        elapsed = time.monotonic() - self.tally.started
        return f"episodes {self.tally.done}/{self.tally.total}  {self.tally.describe()}  [{elapsed:.0f}s]"

    def _heartbeat(self) -> None:
        while not self._stop.wait(1.0):
            if time.monotonic() - self._last_line < self.heartbeat_s:
                continue
            with self._lock:
                now = time.monotonic()
                building = [
                    f"{image} {step} ({now - since:.0f}s)" for image, (step, since) in self._building.items()
                ]
            status = self._status()
            self._say(f"{status}  building: {'; '.join(building)}" if building else status)

    def _say(self, line: str) -> None:
        with self._lock:
            self._last_line = time.monotonic()
            self.console.print(Text(line), soft_wrap=True)
            self.console.file.flush()
