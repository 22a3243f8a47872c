"""``ares tasks``: commands about task sources themselves; ``validate`` checks that a source's tasks
can be trusted before anyone trains or evaluates on them; ``stats`` summarizes a SWE-format set;
``synth`` makes one from a Python project (``ares.factory``).

``ares tasks validate SOURCE`` runs each task's reference solution (the oracle policy, ``--repeats``
times) and the null policy on the same runner, sandboxes and verifiers as ``ares run``, writes
``validation.json`` in ``--out`` as each task is judged, and prints the tasks that are not good with
the reason. Exit code 0 when every task in the report is good, 1 when one is not, 2 on a mistake.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from ares.cli.audit import audit, audit_synth_set, print_audit_verdicts
from ares.cli.common import App, fail, plain_console
from ares.cli.engine_check import check_engine
from ares.cli.pass_rates_report import load_pass_rates, print_pass_rates
from ares.cli.policy_flags import PolicyFlags, unused_flags
from ares.cli.progress import run_progress
from ares.cli.reports import report_at
from ares.cli.run_config import RunConfig
from ares.cli.run_options import (
    BaseUrlOption,
    ConcurrencyOption,
    ImageTemplateOption,
    MaxTokensOption,
    ModelOption,
    PathOption,
    SandboxOption,
    ShardOption,
    SplitOption,
    StepLimitOption,
    StrictOption,
    TasksOption,
    TemperatureOption,
    VerifierModeOption,
)
from ares.cli.task_config import quiet_task_config, reported_task_config
from ares.cli.task_source import SourceArgument, resolve_source
from ares.core.closing import Closable
from ares.errors import AresError
from ares.factory.asking import PolicySpec
from ares.images.progress import build_listener
from ares.policies import make_policy
from ares.presets import load_tasks, make
from ares.sandbox.backends import make_sandbox_factory
from ares.validation import REPORT_NAME, TaskValidation, ValidationReport, validate_tasks
from ares.validation.difficulty import measure_policy

app = App(help="Work with task sources: make, validate, audit and summarize them.", no_args_is_help=True)
app.command()(audit)
console = plain_console()

#: Exit code when some task is not good (mistakes exit 2).
EXIT_BAD = 1
_REASON_CHARS = 160

RepeatsOption = Annotated[
    int,
    typer.Option("--repeats", "-r", min=1, help="Oracle runs per task (rewards that differ: flaky)."),
]
ValidateOutOption = Annotated[
    Path | None,
    typer.Option("--out", help=f"Directory for {REPORT_NAME} (default: runs/validate-PRESET-TIME)."),
]
ValidateResumeOption = Annotated[
    bool,
    typer.Option("--resume", help="Keep the tasks already judged in --out (errored ones run again)."),
]


@app.command()
def validate(
    source: SourceArgument,
    path: PathOption = None,
    tasks: TasksOption = None,
    shard: ShardOption = None,
    split: SplitOption = None,
    image_template: ImageTemplateOption = None,
    verifier_mode: VerifierModeOption = None,
    repeats: RepeatsOption = 2,
    concurrency: ConcurrencyOption = 4,
    sandbox: SandboxOption = "local",
    out: ValidateOutOption = None,
    resume: ValidateResumeOption = False,
    strict: StrictOption = False,
    policy: Annotated[
        str | None,
        typer.Option(
            "--policy",
            help="Also measure how hard each task is for this policy (e.g. local:PATH.gguf): --repeats "
            "runs per task, their outcomes and pass rate in the report (what --pass-rates seeds from).",
        ),
    ] = None,
    step_limit: StepLimitOption = 100,
    max_tokens: MaxTokensOption = None,
    temperature: TemperatureOption = None,
) -> None:
    """Check every task of a source: the oracle scores 1 (each of --repeats runs, all agreeing) and the
    null policy 0; a JSON report with each task's verdict (good, broken, flaky, errored), rewards,
    statuses, errors and seconds, and a table of the bad tasks. With --policy, each task's outcomes
    under that policy too (--step-limit bounds every episode; --max-tokens and --temperature go to
    the --policy).

    Exits 0 when every task is good, 1 when some task is not, 2 on a mistake.
    """
    preset, path = resolve_source(source, path)
    sampling = {"max_tokens": max_tokens, "temperature": temperature}
    if policy is None and any(value is not None for value in sampling.values()):
        raise fail("--max-tokens and --temperature apply to the --policy measured; give --policy SPEC")
    flags = None if policy is None else PolicyFlags(policy, flag="--policy", **sampling)
    config = RunConfig(
        preset=preset, policy="oracle", path=path, tasks=tasks, shard=shard, split=split,
        image_template=image_template, verifier_mode=verifier_mode, concurrency=concurrency,
        sandbox=sandbox, out=out, resume=resume, strict=strict, step_limit=step_limit,
    )  # fmt: skip
    out_dir = out if out is not None else Path("runs") / f"validate-{preset}-{time.strftime('%Y%m%d-%H%M%S')}"
    report = _report(config, out_dir / REPORT_NAME, repeats)
    try:
        with reported_task_config(strict):
            task_list = load_tasks(preset, **config.task_options)  # once, for every environment
        sandbox_factory = make_sandbox_factory(sandbox)
    except AresError as exc:
        raise fail(str(exc)) from None
    check_engine(sandbox, sandbox_factory)
    task_ids = [task.id for task in task_list]
    make_env = functools.partial(
        make, preset, sandbox_factory=sandbox_factory, task_list=task_list, **config.env_options
    )
    skip = report.finished & set(task_ids)
    if skip:
        console.print(f"{len(skip)} of {len(task_ids)} tasks already judged in {report.path}")
    progress = run_progress(console, (len(task_ids) - len(skip)) * (repeats + 1), labels=("oracle", "null"))
    started = time.perf_counter()

    async def record(verdict: TaskValidation) -> None:
        report.record(verdict)
        await asyncio.to_thread(report.save)

    try:
        play = validate_tasks(
            make_env, task_ids, repeats=repeats, concurrency=concurrency, skip=skip,
            on_episode=progress.on_result, on_task=record,
        )  # fmt: skip
        with progress, build_listener(progress.on_build), quiet_task_config():
            asyncio.run(play)
        if flags is not None:
            _measure(flags, make_env, task_ids, repeats, concurrency, report)
    except AresError as exc:
        raise fail(str(exc)) from None
    finally:
        if isinstance(sandbox_factory, Closable):
            sandbox_factory.close()
        report.wall_time_s += time.perf_counter() - started
        report.save()
    _print(report, time.perf_counter() - started)
    print_audit_verdicts(path, task_ids)
    if report.bad():
        raise typer.Exit(code=EXIT_BAD)


def _measure(
    flags: PolicyFlags,
    make_env: Any,
    task_ids: list[str],
    repeats: int,
    concurrency: int,
    report: ValidationReport,
) -> None:
    """``--policy``: each task's outcomes under that policy, into the report (saved as each task's
    runs are in; with --resume the tasks already measured under it are kept), and a line."""
    policy = flags.policy
    policy_factory = make_policy(policy, **flags.options)
    kept = report.measured(policy, repeats) & set(task_ids)
    todo = [task_id for task_id in task_ids if task_id not in kept]
    if kept:
        console.print(f"{len(kept)} of {len(task_ids)} tasks already measured under {policy}")

    async def record(task_id: str, runs: list[bool | None]) -> None:
        report.record_policy(policy, {task_id: runs})
        await asyncio.to_thread(report.save)

    if todo:
        play = measure_policy(
            make_env, todo, policy_factory, repeats=repeats, concurrency=concurrency, on_task=record
        )
        with quiet_task_config():
            asyncio.run(play)
    report.settings["policy"] = policy
    report.save()
    scored = [
        run for task_id in task_ids for run in report.tasks.get(task_id, {}).get("policy_outcomes") or ()
        if run is not None
    ]  # fmt: skip
    rate = f"{sum(scored) / len(scored):.1%}" if scored else "-"
    console.print(f"{policy}: {sum(scored)} of {len(scored)} runs passed ({rate}) over {len(task_ids)} tasks")


def _report(config: RunConfig, report_path: Path, repeats: int) -> ValidationReport:
    """A new report, or with --resume the one in --out; a report there without --resume is refused."""
    source: dict[str, Any] = {
        "preset": config.preset, "path": None if config.path is None else str(config.path.resolve()),
        "split": config.split, "image_template": config.image_template, "verifier_mode": config.verifier_mode,
    }  # fmt: skip
    settings = {"repeats": repeats, "sandbox": config.sandbox, "concurrency": config.concurrency}
    return report_at(ValidationReport, report_path, source, settings, resume=config.resume)


def _print(report: ValidationReport, wall_time_s: float) -> None:
    """The bad tasks with their reasons, then the counts and where the report is."""
    bad = report.bad()
    if bad:
        table = Table("task", "verdict", "oracle", "null", "seconds", "reason", title="tasks not good")
        for item in bad:
            rewards = ", ".join("-" if r is None else f"{r:g}" for r in item["oracle_rewards"])
            null = "-" if item["null_reward"] is None else f"{item['null_reward']:g}"
            reason = item["reason"] if len(item["reason"]) <= _REASON_CHARS else item["reason"][:157] + "..."
            style = "yellow" if item["verdict"] == "flaky" else "red"
            table.add_row(
                item["task_id"], Text(item["verdict"], style=style), rewards, null,
                f"{item['seconds']:.1f}", reason,
            )  # fmt: skip
        console.print(table)
    counts = report.counts()
    parts = ", ".join(f"{verdict} {counts[verdict]}" for verdict in ("good", "broken", "flaky", "errored"))
    line = f"{counts['tasks']} tasks: {parts}  (this run {wall_time_s:.1f}s)  report: {report.path}"
    console.print(line, soft_wrap=True)


@app.command()
def stats(
    path: Annotated[
        Path | None, typer.Argument(help="SWE-format instances: a file or a set's directory.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    pass_rates: Annotated[
        Path | None,
        typer.Option(
            "--pass-rates",
            help="Each task's measured pass rate: an ares run dir (its pass_rates.json, else its "
            "episodes), a pass_rates.json or a tasks validate report.",
        ),
    ] = None,
) -> None:
    """Summarize a SWE-format instance set: instances per project and per strategy, combinations, and
    the spread of the difficulty signals (lines changed, FAIL_TO_PASS and PASS_TO_PASS sizes); with
    --pass-rates, the pass rate of each task a run or a validation measured."""
    from ares.factory.stats import set_stats

    if pass_rates is not None:
        try:
            print_pass_rates(console, load_pass_rates(pass_rates), as_json=as_json)
        except AresError as exc:
            raise fail(str(exc)) from None
    if path is None:
        if pass_rates is None:
            raise fail("give a SWE-format set (PATH), --pass-rates SOURCE, or both")
        return
    try:
        summary = set_stats(path)
    except AresError as exc:
        raise fail(str(exc)) from None
    if as_json:
        console.print_json(data=summary.to_dict())
        return
    console.print(
        f"{summary.instances} instances, {summary.combinations} combinations, "
        f"{summary.tests_visible} with visible tests"
    )
    for title, counts in (("project", summary.by_project), ("strategy", summary.by_strategy)):
        table = Table(title, "instances")
        for name, count in counts.items():
            table.add_row(name, str(count))
        console.print(table)
    spreads = Table("signal", "min", "median", "max")
    for name, spread in (
        ("lines changed", summary.lines_changed), ("FAIL_TO_PASS", summary.fail_to_pass),
        ("PASS_TO_PASS", summary.pass_to_pass),
    ):  # fmt: skip
        spreads.add_row(name, f"{spread.low:g}", f"{spread.median:g}", f"{spread.high:g}")
    console.print(spreads)
    for skipped in summary.skipped:
        console.print(f"skipped: {skipped}")


@app.command()
def synth(
    source: Annotated[
        str,
        typer.Argument(help="A git repository or directory, an sdist, or a PyPI requirement (toolz==1.2.0)."),
    ],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="The set's directory (instances.jsonl, images/, work/).")
    ],
    strategies: Annotated[
        str | None, typer.Option("--strategies", help="Comma-separated mutation strategies (default: all).")
    ] = None,
    max_candidates: Annotated[
        int, typer.Option("--max-candidates", min=1, help="Single bugs to validate.")
    ] = 300,
    per_function: Annotated[int, typer.Option("--per-function", min=1, help="Candidates per function.")] = 2,
    combinations: Annotated[
        int, typer.Option("--combinations", min=0, help="Pairs of kept bugs (one file) to try.")
    ] = 40,
    workers: Annotated[
        int | None, typer.Option("--workers", min=1, help="Forks at once (default: CPUs).")
    ] = None,
    timeout: Annotated[float, typer.Option("--timeout", min=1, help="Seconds per candidate run.")] = 60.0,
    max_failing: Annotated[
        int, typer.Option("--max-failing", min=1, help="Most FAIL_TO_PASS tests kept.")
    ] = 50,
    tests_visible: Annotated[
        bool, typer.Option("--tests-visible", help="Leave the failing tests in the agent's repository.")
    ] = False,
    seed: Annotated[int, typer.Option("--seed", help="Sampling seed (same seed, same set).")] = 0,
    llm_policy: Annotated[
        str | None,
        typer.Option(
            "--llm-policy", metavar="SPEC", help="A policy that writes bugs too (llm_rewrite, llm_modify)."
        ),
    ] = None,
    llm_functions: Annotated[
        int, typer.Option("--llm-functions", min=1, help="Functions the --llm-policy is asked about.")
    ] = 20,
    writer: Annotated[
        str | None,
        typer.Option("--writer", metavar="SPEC", help="A policy that writes the problem statements."),
    ] = None,
    policy_script: Annotated[
        Path | None, typer.Option("--policy-script", help="JSONL responses of a scripted policy.")
    ] = None,
    model: ModelOption = None,
    base_url: BaseUrlOption = None,
    max_tokens: MaxTokensOption = None,
    temperature: TemperatureOption = None,
    policy_timeout: Annotated[
        float, typer.Option("--policy-timeout", min=0.001, help="Seconds one policy answer may take.")
    ] = 300.0,
    audit_set: Annotated[
        bool,
        typer.Option(
            "--audit", help="Audit the set (`ares tasks audit`) and drop its hackable and weak tasks."
        ),
    ] = False,
    audit_mutants: Annotated[
        int, typer.Option("--audit-mutants", min=0, help="Mutants per task (--audit).")
    ] = 10,
) -> None:
    """Make validated SWE-format tasks from a Python project: bugs on its syntax tree (and, with
    --llm-policy, written by a policy), each kept only when 1..--max-failing of its passing tests
    fail, twice in a row, in a fork of the installed project."""
    try:
        from ares.factory.factory import SynthOptions, synthesize
        from ares.factory.llm_bugs import LLM_STRATEGIES
        from ares.factory.mutate import STRATEGIES
    except ImportError as exc:
        raise fail(f"ares tasks synth needs {exc.name}: pip install 'ares[synth]'") from None

    chosen = tuple(s.strip() for s in strategies.split(",") if s.strip()) if strategies else None
    known = (*STRATEGIES, *LLM_STRATEGIES)
    unknown = sorted(set(chosen or ()) - set(known))
    if unknown:
        raise fail(f"unknown strategies: {', '.join(unknown)}; choose from {', '.join(known)}")
    if llm_policy is None and set(chosen or ()) & set(LLM_STRATEGIES):
        raise fail(f"the strategies {', '.join(LLM_STRATEGIES)} need --llm-policy SPEC")
    given = {
        "script": policy_script, "model": model, "base_url": base_url, "max_tokens": max_tokens,
        "temperature": temperature,
    }  # fmt: skip
    policies = _synth_policies({"--llm-policy": llm_policy, "--writer": writer}, given, policy_timeout)
    options = SynthOptions(
        strategies=chosen, max_candidates=max_candidates, per_function=per_function,
        combinations=combinations, workers=workers, timeout_s=timeout, max_failing=max_failing,
        tests_visible=tests_visible, seed=seed, llm_policy=policies.get("--llm-policy"),
        llm_functions=llm_functions, writer=policies.get("--writer"),
    )  # fmt: skip
    try:
        with build_listener(lambda event: None):
            report = asyncio.run(synthesize(source, out, options, say=console.print))
    except (AresError, ValueError) as exc:
        raise fail(str(exc)) from None
    table = Table("strategy", "instances")
    for name, count in report.by_strategy.items():
        table.add_row(name, str(count))
    console.print(table)
    if report.llm is not None:
        console.print(f"LLM bugs: {json.dumps(report.llm['by_strategy'])}")
    if report.writer is not None:
        written = {k: v for k, v in report.writer.items() if k != "asking"}
        console.print(f"statements by {writer or ''}: {json.dumps(written)}")
    console.print(
        f"{report.instances} instances from {report.candidates} candidates in {out / 'instances.jsonl'} "
        f"(image {report.image}; yield per reason in {out / 'synth.json'})"
    )
    if audit_set and report.instances:
        from ares.audit import EXPLOITS, AuditOptions

        try:
            dropped = audit_synth_set(out / "instances.jsonl", AuditOptions(EXPLOITS, mutants=audit_mutants))
        except AresError as exc:
            raise fail(str(exc)) from None
        for task_id, label in dropped.items():
            console.print(f"dropped {task_id}: {label}", soft_wrap=True)
        console.print(f"audit: {len(dropped)} of {report.instances} dropped (report {out / 'audit.json'})")


def _synth_policies(
    specs: dict[str, str | None], given: dict[str, Any], timeout: float
) -> dict[str, PolicySpec]:
    """Each given policy (by its flag) with the flags it takes, checked as ``ares run`` checks them;
    a flag no given policy takes is a mistake. The sampling flags also go on each request."""
    taken = {
        flag: PolicyFlags.taking(spec, given, flag=flag, script_flag="--policy-script")
        for flag, spec in specs.items()
        if spec is not None
    }
    unused = unused_flags(given, list(taken.values()), script_flag="--policy-script")
    if unused:
        which = ", ".join(f"{flag} {flags.policy}" for flag, flags in taken.items()) or "no policy"
        raise fail(f"{', '.join(unused)}: not an option of {which}")
    return {
        flag: PolicySpec(
            flags.policy,
            flags.options,
            max_tokens=given.get("max_tokens"),
            temperature=given.get("temperature"),
            timeout_s=timeout,
        )
        for flag, flags in taken.items()
    }
