"""``ares doctor``: check this machine, show what works, and print the commands that fix the rest."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from ares.cli.common import plain_console
from ares.doctor import Diagnosis, diagnose

console = plain_console()


def doctor(
    json_output: Annotated[
        bool, typer.Option("--json", help="Print one JSON object: checks, backends, limits, install.")
    ] = False,
) -> None:
    """Probe what this machine supports: sandbox backends, resource limits, and what to install.

    Exits 0 when the default local backend can run, 1 otherwise.
    """
    diagnosis = diagnose()
    if json_output:
        typer.echo(json.dumps(diagnosis.to_json(), indent=2))
    else:
        _print(diagnosis)
    raise typer.Exit(code=0 if diagnosis.local_ready else 1)


def _print(diagnosis: Diagnosis) -> None:
    who = "root" if diagnosis.root else "an unprivileged user"
    fixes = any(not c.ok and c.fix for c in diagnosis.checks)
    columns = ["check", "", "detail", *(["fix"] if fixes else [])]
    checks = Table(*columns, title=f"checks (running as {who})", title_justify="left")
    for check in diagnosis.checks:
        mark = Text("ok", style="green") if check.ok else Text("no", style="red")
        fix = [check.fix or ""] if fixes else []
        checks.add_row(check.name, mark, check.detail, *fix)
    backends = Table("backend", "status", title="backends", title_justify="left")
    for backend in diagnosis.backends:
        style = "green" if backend.ready else "red"
        backends.add_row(backend.name, Text(backend.detail, style=style))
    limits = Table("limit", "enforced by", "detail", title="limits (local backend)", title_justify="left")
    for limit in diagnosis.limits:
        style = "red" if limit.mechanism in ("unenforced", "unavailable") else "green"
        limits.add_row(limit.resource, Text(limit.mechanism, style=style), limit.detail)
    for table in (checks, backends, limits):
        console.print(table)
    if diagnosis.install:
        console.print("to install what is missing:")
        for command in diagnosis.install:
            console.print(f"  {command}", soft_wrap=True)
    else:
        console.print("nothing is missing.")
    console.print(Text(f"checked in {diagnosis.elapsed_s:.2f} s", style="dim"))
