"""``ares images pull``: a pull with one live row per layer (plain lines when not on a terminal)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TaskID, TextColumn, TransferSpeedColumn
from rich.text import Text

from ares.cli.common import fail, plain_console
from ares.errors import AresError
from ares.images.cache import ImageCache
from ares.images.progress import ImageEvent, PullEvent
from ares.images.pull import PulledImage, pull_image
from ares.images.registry import Platform

console = plain_console()
CACHE_HELP = "Image cache (default: $ARES_CACHE_DIR or ~/.cache/ares)."


def parse_platform(text: str | None) -> Platform | None:
    """``os/arch[/variant]`` as a Platform (None: the host's)."""
    if not text:
        return None
    parts = text.split("/")
    if len(parts) not in (2, 3) or not all(parts):
        raise AresError(f"--platform expects os/arch[/variant] (e.g. linux/arm64/v8), got {text!r}")
    return Platform(parts[0], parts[1], parts[2] if len(parts) == 3 else None)


class PullDisplay:
    """Renders PullEvents: a bar per layer on a terminal, a line per layer state otherwise."""

    def __init__(self, out: Console) -> None:
        self.console = out
        self.live = out.is_terminal
        self.progress = Progress(
            TextColumn("{task.description}", markup=False), BarColumn(bar_width=30), DownloadColumn(),
            TransferSpeedColumn(), console=out, transient=False,
        )  # fmt: skip
        self._rows: dict[str, TaskID] = {}
        self._said: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def __enter__(self) -> PullDisplay:
        if self.live:
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live:
            self.progress.stop()

    def on_event(self, event: ImageEvent) -> None:
        if not isinstance(event, PullEvent):
            return
        with self._lock:
            if event.layer is None:
                if event.state == "resolving":
                    self._say(f"{event.image}: resolving")
                return
            short = event.layer.removeprefix("sha256:")[:12]
            if self.live:
                row = self._rows.get(event.layer)
                if row is None:
                    row = self.progress.add_task(short, total=event.total)
                    self._rows[event.layer] = row
                self.progress.update(
                    row, completed=event.done, total=event.total, description=f"{short} {event.state}"
                )
            elif (event.layer, event.state) not in self._said and event.state != "extracting":
                self._said.add((event.layer, event.state))
                self._say(event.describe())

    def _say(self, line: str) -> None:
        self.console.print(Text(line), soft_wrap=True)


def pull(
    name: Annotated[str, typer.Argument(help="An image: reference, oci:PATH[:TAG] or docker-archive:PATH.")],
    platform: Annotated[
        str | None, typer.Option("--platform", help="os/arch[/variant] (default: this machine's).")
    ] = None,
    always: Annotated[
        bool, typer.Option("--always", help="Resolve the tag again even if the image is stored.")
    ] = False,
    cache_dir: Annotated[
        Path | None,
        typer.Option("--cache-dir", help="Image cache (default: $ARES_CACHE_DIR or ~/.cache/ares)."),
    ] = None,
) -> None:
    """Pull an image into the layer store (no daemon); layers already stored are not downloaded."""
    try:
        wanted = parse_platform(platform)
        with PullDisplay(console) as display:
            image = asyncio.run(
                pull_image(
                    name, cache=ImageCache(cache_dir), platform=wanted, listener=display.on_event,
                    policy="always" if always else "missing",
                )
            )  # fmt: skip
    except AresError as exc:
        raise fail(str(exc)) from None
    console.print(summary(image), soft_wrap=True)


def summary(image: PulledImage) -> Text:
    """The final line: digest, size on disk, what this pull moved."""
    return Text.assemble(
        ("pulled", "green"),
        f" {image.reference}: {len(image.diff_ids)} layers, "
        f"{image.size_bytes / 1e6:.1f} MB on disk; moved {image.bytes_downloaded / 1e6:.1f} MB "
        f"({image.layers_downloaded} layers downloaded)",
    )
