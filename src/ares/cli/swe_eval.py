"""``ares eval``: grade SWE-bench predictions from any agent, as ``ares run swebench`` grades its own.

Reads a predictions file (JSONL or JSON, the harness's shapes), the instances of ``--path``, applies
each non-empty prediction in the instance's sandbox and grades it with the SWE verifier, in
parallel (``ares.evaluation.swe``). Writes the official run report (``OUT/report.json``) and
per-instance reports and logs, prints one line per instance and a summary. Exits 0 when every
instance was graded (resolved or not), 1 when one errored, 2 on bad input.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from ares.cli.common import fail, plain_console
from ares.cli.run_options import ImageTemplateOption, SandboxOption, SplitOption
from ares.core.closing import Closable
from ares.errors import AresError
from ares.evaluation.swe import (
    DEFAULT_CONCURRENCY,
    EvalRun,
    evaluate_predictions,
    tasks_for,
    write_eval,
)
from ares.sandbox.backends import make_sandbox_factory
from ares.tasks.swe.eval_report import InstanceResult, InstanceStatus
from ares.tasks.swe.predictions import load_predictions
from ares.tasks.swe.task import load_swe_tasks

console = plain_console()
EXIT_ERRORED = 1
_MAX_ERRORS_SHOWN = 20
_STYLE = {
    InstanceStatus.RESOLVED: "green",
    InstanceStatus.UNRESOLVED: "yellow",
    InstanceStatus.EMPTY_PATCH: "dim",
    InstanceStatus.ERROR: "red",
}


def swe_eval(
    predictions: Annotated[
        Path, typer.Argument(help="Predictions: JSONL or JSON rows of instance_id, model_patch.")
    ],
    path: Annotated[Path, typer.Option("--path", help="The instance file or dataset dir they answer.")],
    split: SplitOption = None,
    image_template: ImageTemplateOption = None,
    concurrency: Annotated[int, typer.Option("--concurrency", "-c", min=1)] = DEFAULT_CONCURRENCY,
    out: Annotated[
        Path | None, typer.Option("--out", help="Report directory (default runs/eval-<name>-<time>).")
    ] = None,
    sandbox: SandboxOption = "local",
) -> None:
    """Grade SWE-bench PREDICTIONS on the instances of --path with the SWE verifier.

    Exits 0 when every instance was graded, 1 when one errored, 2 on bad input.
    """
    try:
        rows = load_predictions(predictions)
        tasks = load_swe_tasks(path, split=split, image_template=image_template)
        tasks_for(rows, tasks)
        factory = make_sandbox_factory(sandbox)
    except AresError as exc:
        raise fail(str(exc)) from None
    out_dir = out or Path("runs") / f"eval-{predictions.stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    runnable = sum(not p.empty for p in rows)
    console.print(
        f"grading {runnable} predictions ({len(rows) - runnable} empty) on {len(tasks)} instances, "
        f"{concurrency} at a time"
    )
    try:
        run = asyncio.run(
            evaluate_predictions(
                rows, tasks, sandbox_factory=factory, concurrency=concurrency, on_result=_line
            )
        )
    finally:
        if isinstance(factory, Closable):
            factory.close()
    report_path = write_eval(run, out_dir)
    _summary(run, report_path)
    if run.errored:
        raise typer.Exit(code=EXIT_ERRORED)


def _line(result: InstanceResult) -> None:
    if result.status is InstanceStatus.EMPTY_PATCH:
        return  # listed once in the summary
    style = _STYLE[result.status]
    line = f" {result.instance_id} ({result.duration_s:.1f}s)"
    console.print(Text.assemble((f"{result.status.value:<10}", style), line))


def _summary(run: EvalRun, report_path: Path) -> None:
    report = run.report
    table = Table(title="ares eval", show_header=False)
    rows = [
        ("instances", str(report["total_instances"])),
        ("submitted", str(report["submitted_instances"])),
        ("completed", str(report["completed_instances"])),
        ("resolved", _share(report["resolved_instances"], report["submitted_instances"])),
        ("unresolved", str(report["unresolved_instances"])),
        ("empty patch", str(report["empty_patch_instances"])),
        ("errors", str(report["error_instances"])),
        ("wall time", f"{run.wall_time_s:.1f}s"),
        ("report", str(report_path)),
    ]
    for key, value in rows:
        table.add_row(key, value)
    console.print(table)
    for result in run.errored[:_MAX_ERRORS_SHOWN]:
        message = (result.error or "").strip().splitlines()
        line = f"error: {result.instance_id}: {message[0] if message else '?'}"
        console.print(line, soft_wrap=True)
    if len(run.errored) > _MAX_ERRORS_SHOWN:
        console.print(f"... and {len(run.errored) - _MAX_ERRORS_SHOWN} more errors (see {report_path})")


def _share(count: int, total: int) -> str:
    return f"{count} ({count / total:.1%})" if total else str(count)
