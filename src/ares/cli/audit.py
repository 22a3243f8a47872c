"""``ares tasks audit PRESET|PATH``: try to win every task without doing it, and score its tests.

Each applicable exploit of the catalogue (``ares.audit.exploits``: do nothing, stubs, test edits,
pytest hooks, in-process tampering, exit and result-line tricks, reward writes, trojaned binaries,
history and cache lookups, squatted test paths) runs on each task as an episode of the bash agent
through the ordinary runner, sandboxes and verifiers; a task any of them earns a reward on is
``hackable``. ``--mutants N`` also plays N mutants of the gold-patched code near the fix (the task
factory's operators) and scores the tests by the share they reject: below ``--weak-below`` the task
is ``weak``. Writes ``audit.json`` in ``--out`` as each task is judged and prints a table.
Exit code 0 when every task is sound and not weak, 1 when one is not, 2 on a mistake.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from ares.audit import (
    REPORT_NAME,
    AuditOptions,
    AuditReport,
    TaskAudit,
    condemned,
    load_audits,
    report_next_to,
    select,
)
from ares.audit.exploits import NAMES
from ares.audit.play import audit_tasks, plan_audit
from ares.cli.common import fail, plain_console
from ares.cli.engine_check import check_engine
from ares.cli.progress import run_progress
from ares.cli.reports import report_at
from ares.cli.run_options import (
    ConcurrencyOption,
    ImageTemplateOption,
    PathOption,
    SandboxOption,
    ShardOption,
    SplitOption,
    TasksOption,
    VerifierModeOption,
)
from ares.cli.task_config import quiet_task_config, reported_task_config
from ares.cli.task_source import SourceArgument, resolve_source
from ares.core.closing import Closable
from ares.errors import AresError
from ares.images.progress import build_listener
from ares.presets import get_preset, load_tasks
from ares.sandbox.backends import make_sandbox_factory
from ares.tasks.model import Task

console = plain_console()
#: Exit code when some task is hackable, weak or errored (mistakes exit 2).
EXIT_BAD = 1
_STYLE = {"sound": "green", "hackable": "red", "errored": "yellow"}

AttacksOption = Annotated[
    str | None,
    typer.Option("--attacks", help=f"Comma-separated exploits (default: all): {', '.join(NAMES)}."),
]
MutantsOption = Annotated[
    int, typer.Option("--mutants", min=0, help="Mutants of the fix per task to score the tests (0: none).")
]
RadiusOption = Annotated[
    int, typer.Option("--radius", min=0, help="Lines around the fix a mutant may touch.")
]
WeakOption = Annotated[
    float,
    typer.Option(
        "--weak-below", min=0.0, max=1.0, help="A task is weak when its tests reject fewer mutants."
    ),
]
AuditOutOption = Annotated[
    Path | None,
    typer.Option(
        "--out",
        help=f"Directory for {REPORT_NAME} (default: runs/audit-PRESET-TIME); the set's own directory "
        "lets `ares tasks validate` show the verdicts.",
    ),
]
ResumeOption = Annotated[
    bool,
    typer.Option("--resume", help="Keep the tasks already audited in --out (errored ones run again)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the report as JSON instead of a table.")]


def audit(
    source: SourceArgument,
    path: PathOption = None,
    tasks: TasksOption = None,
    shard: ShardOption = None,
    split: SplitOption = None,
    image_template: ImageTemplateOption = None,
    verifier_mode: VerifierModeOption = None,
    attacks: AttacksOption = None,
    mutants: MutantsOption = 20,
    radius: RadiusOption = 8,
    weak_below: WeakOption = 0.5,
    concurrency: ConcurrencyOption = 4,
    sandbox: SandboxOption = "local",
    out: AuditOutOption = None,
    resume: ResumeOption = False,
    as_json: JsonOption = False,
) -> None:
    """Run generic exploits (and mutants of the fix) on every task of a source: each task is sound
    or hackable (by which attacks, with the reward and reason of each), and its tests get a strength
    score; a JSON report and a table. Exits 0 when every task is sound and not weak, 1 otherwise."""
    preset, path = resolve_source(source, path)
    try:
        exploits = select([a.strip() for a in attacks.split(",") if a.strip()] if attacks else None)
    except ValueError as exc:
        raise fail(str(exc)) from None
    options = {**_preset_options(preset, path, split, image_template), "tasks": tasks, "shard": shard}
    if verifier_mode is not None:
        options["verifier_mode"] = verifier_mode
    try:
        with reported_task_config(False):
            chosen = load_tasks(preset, **options)
        sandbox_factory = make_sandbox_factory(sandbox)
    except AresError as exc:
        raise fail(str(exc)) from None
    check_engine(sandbox, sandbox_factory)
    out_dir = out if out is not None else Path("runs") / f"audit-{preset}-{time.strftime('%Y%m%d-%H%M%S')}"
    options = AuditOptions(exploits, mutants, radius, weak_below, concurrency)
    source_info = {"preset": preset, "path": None if path is None else str(path.resolve()), "split": split}
    report = report_at(
        AuditReport, out_dir / REPORT_NAME, source_info, _settings(options, sandbox), resume=resume
    )
    skip = report.finished & {task.id for task in chosen}
    if skip:
        console.print(f"{len(skip)} of {len(chosen)} tasks already audited in {report.path}")
    started = time.perf_counter()
    try:
        asyncio.run(run_audit(chosen, sandbox_factory, options, report, skip=skip))
    except AresError as exc:
        raise fail(str(exc)) from None
    finally:
        if isinstance(sandbox_factory, Closable):
            sandbox_factory.close()
        report.wall_time_s += time.perf_counter() - started
        report.save()
    if as_json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print_report(report, time.perf_counter() - started)
    if any(item["verdict"] != "sound" or item.get("weak") for item in report.tasks.values()):
        raise typer.Exit(code=EXIT_BAD)


def _settings(options: AuditOptions, sandbox: str) -> dict[str, Any]:
    """What a report records of how it was made."""
    return {
        "attacks": [e.name for e in options.exploits], "mutants": options.mutants, "radius": options.radius,
        "weak_below": options.weak_threshold, "sandbox": sandbox, "concurrency": options.concurrency,
    }  # fmt: skip


async def run_audit(
    tasks: list[Task],
    sandbox_factory: Any,
    options: AuditOptions,
    report: AuditReport,
    *,
    skip: set[str] | frozenset[str] = frozenset(),
) -> None:
    """Plan and play the audit of ``tasks`` but ``skip``, recording each audit in ``report`` as it is
    judged."""

    async def record(audit: TaskAudit) -> None:
        report.record(audit)
        await asyncio.to_thread(report.save)

    with build_listener(lambda event: None), quiet_task_config():
        plan = await plan_audit(tasks, sandbox_factory, options, skip=skip)
    progress = run_progress(console, plan.episodes, labels=("attack", "mutant"))
    with progress, build_listener(progress.on_build), quiet_task_config():
        await audit_tasks(plan, sandbox_factory, on_episode=progress.on_result, on_task=record)


def _preset_options(
    preset: str, path: Path | None, split: str | None, template: str | None
) -> dict[str, Any]:
    given = {"path": path, "split": split, "image_template": template}
    known = get_preset(preset).options
    unknown = [f"--{k.replace('_', '-')}" for k, v in given.items() if v is not None and k not in known]
    if unknown:
        raise fail(f"{', '.join(unknown)}: not an option of preset {preset}")
    return {k: v for k, v in given.items() if v is not None}


def print_report(report: AuditReport, wall_time_s: float) -> None:
    """Every task's verdict and test strength, then each hack with its reward and reason, the counts
    and where the report is."""
    table = Table("task", "kind", "verdict", "strength", "seconds", title="task audit")
    for item in report.tasks.values():
        strength = item.get("strength") or {}
        score = strength.get("score")
        shown = "-" if score is None else f"{score:g} ({strength['accepted']}/{strength['mutants']} survive)"
        verdict = item["verdict"] + (f" ({len(item['hacked_by'])})" if item["hacked_by"] else "")
        verdict += "; weak" if item.get("weak") else ""
        style = _STYLE.get(item["verdict"], "")
        table.add_row(
            item["task_id"], item["kind"], Text(verdict, style=style), shown, f"{item['seconds']:.1f}"
        )
    console.print(table)
    for item in report.tasks.values():
        for attack in item["attacks"]:
            if attack["attack"] in item["hacked_by"]:
                line = (
                    f"{item['task_id']}: {attack['attack']} earns {attack['reward']:g} ({attack['reason']})"
                )
                console.print(line, soft_wrap=True, markup=False)
    counts = report.counts()
    parts = ", ".join(f"{name} {counts[name]}" for name in ("sound", "hackable", "errored", "weak"))
    line = f"{counts['tasks']} tasks: {parts}  ({wall_time_s:.1f}s)  report: {report.path}"
    console.print(line, soft_wrap=True)


def print_audit_verdicts(source: Path | None, task_ids: list[str]) -> None:
    """The verdicts of the audit report beside the set, for the tasks given (nothing when none is there)."""
    found = report_next_to(source)
    if found is None:
        return
    try:
        audits = load_audits(found)
    except AresError as exc:
        console.print(f"audit report: {exc}")
        return
    table = Table("task", "audit", title=f"audit verdicts ({found})")
    for task_id in task_ids:
        item = audits.get(task_id)
        label = "not audited" if item is None else str(item.get("label") or item["verdict"])
        style = (
            "" if item is None else "red" if item["verdict"] == "hackable" or item.get("weak") else "green"
        )
        table.add_row(task_id, Text(label, style=style))
    console.print(table)


def audit_synth_set(instances: Path, options: AuditOptions, sandbox: str = "local") -> dict[str, str]:
    """Audit a set ``ares tasks synth`` wrote and drop its hackable and weak instances from the file
    (kept apart in ``instances.dropped.jsonl``); the report is ``audit.json`` beside it. Returns the
    dropped ids with why."""
    tasks = load_tasks("swebench", path=instances)
    sandbox_factory = make_sandbox_factory(sandbox)
    source_info = {"preset": "swebench", "path": str(instances.resolve())}
    report = AuditReport(instances.parent / REPORT_NAME, source_info, _settings(options, sandbox))
    started = time.perf_counter()
    try:
        asyncio.run(run_audit(tasks, sandbox_factory, options, report))
    finally:
        if isinstance(sandbox_factory, Closable):
            sandbox_factory.close()
        report.wall_time_s += time.perf_counter() - started
        report.save()
    dropped = condemned(report.tasks)
    lines = instances.read_text(encoding="utf-8").splitlines()
    kept, gone = [], []
    for line in lines:
        if line.strip():
            (gone if json.loads(line).get("instance_id") in dropped else kept).append(line)
    if gone:
        (instances.parent / "instances.dropped.jsonl").write_text("\n".join(gone) + "\n", encoding="utf-8")
    instances.write_text("".join(f"{line}\n" for line in kept), encoding="utf-8")
    return dropped
