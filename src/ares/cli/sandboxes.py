"""``ares sandboxes gc``: remove what sandboxes of dead processes left behind."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from ares.cli.common import App, fail, plain_console
from ares.errors import SandboxError, SandboxUnavailableError
from ares.sandbox.local import janitor as local_janitor

app = App(help="Clean up sandboxes left behind by crashed processes.", no_args_is_help=True)
console = plain_console()


@app.command()
def gc(
    everything: Annotated[
        bool,
        typer.Option(
            "--all", help="Also remove docker sandboxes of live processes and other hosts (not local dirs)."
        ),
    ] = False,
    docker_host: Annotated[
        str | None,
        typer.Option("--docker-host", help="Docker API URL (default: $DOCKER_HOST, else the usual sockets)."),
    ] = None,
) -> None:
    """Remove local sandbox dirs and docker containers whose owner process is dead."""
    try:
        removed, failures = _sweep_local()
    except SandboxError as exc:
        raise fail(str(exc)) from None
    for path in removed:
        console.print(f"removed local sandbox dir {path}")
    for failure in failures:
        console.print(Text.assemble(("could not remove", "yellow"), " ", failure), soft_wrap=True)
    _gc_docker(docker_host, everything=everything)
    if failures:
        raise typer.Exit(code=1)


def _sweep_local() -> tuple[list[Path], list[str]]:
    """(the stale dirs that are gone now, what could not be removed)."""
    root = local_janitor.state_root()
    before = set(root.iterdir())
    failures = local_janitor.sweep_stale(root)
    return sorted(before - set(root.iterdir())), failures


def _gc_docker(docker_host: str | None, *, everything: bool) -> None:
    try:
        from ares.sandbox.docker.client import connect, resolve_base_url
        from ares.sandbox.docker.janitor import gc as docker_gc
    except ImportError:
        console.print("docker: skipped (the docker SDK is not installed: pip install 'ares[docker]')")
        return
    try:
        client = connect(docker_host, timeout_s=30)
    except SandboxUnavailableError as exc:
        if docker_host is not None:  # asked for explicitly: that is an error, not a skip
            raise fail(str(exc)) from None
        console.print(f"docker: skipped (no engine answers at {resolve_base_url()})")
        return
    try:
        report = docker_gc(client, everything=everything)
    finally:
        client.close()
    for name in report.containers:
        console.print(f"removed docker container {name}")
    for image in report.images:
        console.print(f"removed docker image {image}")
    if not report.containers and not report.images:
        console.print("docker: nothing to remove")
