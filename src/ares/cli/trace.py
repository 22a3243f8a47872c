"""``ares trace merge IN... -o OUT``: one Perfetto timeline from per-process span traces."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ares.cli.common import App, fail, plain_console
from ares.tracing.files import TraceFileError, merge_traces, write_trace

app = App(help="Span traces (Chrome JSON for Perfetto).", no_args_is_help=True)
console = plain_console(soft_wrap=True)


@app.command()
def merge(
    inputs: Annotated[list[Path], typer.Argument(help="Trace files (Chrome JSON, plain or .gz).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="The merged trace (.json, or .json.gz).")],
) -> None:
    """Merge traces of several processes onto one clock (epoch microseconds), keeping processes apart."""
    missing = [str(p) for p in inputs if not p.is_file()]
    if missing:
        raise fail(f"no such trace file: {', '.join(missing)}")
    try:
        events = merge_traces(inputs)
    except TraceFileError as exc:
        raise fail(str(exc)) from None
    write_trace(out, events)
    processes = {e.get("pid") for e in events if e.get("ph") != "M"}
    spans = sum(1 for e in events if e.get("ph") == "X")
    console.print(f"wrote {out}: {spans} spans from {len(processes)} process(es), {len(inputs)} file(s)")
