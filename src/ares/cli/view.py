"""``ares view DIR``: episode records as one self-contained HTML page, written to a file or served."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Annotated

import typer

from ares.cli.common import fail, plain_console
from ares.records.loader import load_episodes
from ares.records.model import EpisodeRecord
from ares.records.viewer import PageServer, render_html, write_html

console = plain_console()


def _fail(message: str) -> typer.Exit:
    return fail(message)


def records_dir(directory: Path) -> Path:
    """Where the records are: ``DIR/trajectories`` for an ``ares run --out DIR``, else DIR itself."""
    nested = directory / "trajectories"
    return nested if nested.is_dir() else directory


def _load(directory: Path) -> list[EpisodeRecord]:
    if not directory.exists():
        raise _fail(
            f"{directory} does not exist; pass a directory of trajectory records (ares run --out DIR)"
        )
    try:
        episodes = load_episodes(records_dir(directory))
    except (OSError, ValueError, KeyError, TypeError) as exc:  # JSONDecodeError is a ValueError
        raise _fail(f"cannot read the records under {directory}: {exc}") from None
    if not episodes:
        raise _fail(f"no trajectory records (ares.trajectory/1 JSON or JSONL) under {directory}")
    return episodes


def view(
    directory: Annotated[Path, typer.Argument(metavar="DIR", help="A run's --out dir or a JSON/JSONL dir.")],
    out: Annotated[Path | None, typer.Option("--out", "-o", help="HTML to write [DIR/viewer.html].")] = None,
    serve: Annotated[bool, typer.Option("--serve", help="Serve the page on 127.0.0.1 until Ctrl-C.")] = False,
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="--serve port (0: any free).")] = 8765,
    title: Annotated[str | None, typer.Option("--title", help="Page title (default: DIR's name).")] = None,
) -> None:
    """Browse episodes: a filterable, sortable table, each conversation with its commands, and rewards."""
    page_title = title or f"ARES trajectories · {directory.resolve().name}"
    episodes = _load(directory)
    if out is not None or not serve:
        target = write_html(episodes, out or directory / "viewer.html", title=page_title)
        console.print(f"wrote {len(episodes)} episodes to {target}")
    if not serve:
        return

    def render() -> str:
        return render_html(load_episodes(records_dir(directory)), title=page_title)

    try:
        server = PageServer(render, port=port)
    except OSError as exc:
        raise _fail(
            f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}; pick another --port"
        ) from None
    with server:
        console.print(f"serving {len(episodes)} episodes at {server.url}  (Ctrl-C to stop)")
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            console.print("stopped")
