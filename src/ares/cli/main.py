"""The ``ares`` command: list presets and run evaluations with a live progress bar."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ares.cli.doctor import doctor
from ares.cli.export import export as export_command
from ares.cli.images import app as images_app
from ares.cli.sandboxes import app as sandboxes_app
from ares.cli.view import view
from ares.core.status import EpisodeStatus
from ares.errors import AresError, PolicyError, TaskError, UnknownPresetError
from ares.policies import POLICY_NAMES, make_policy
from ares.records.collectors import JsonDirCollector
from ares.registry import list_presets, make
from ares.rollout.runner import EpisodeResult, RunSummary, run_episodes
from ares.sandbox.backends import BACKENDS, UnknownBackendError, make_sandbox_factory

app = typer.Typer(help="ARES: RL environments for LLM coding agents.", no_args_is_help=True)
console = Console()
err_console = Console(stderr=True)
app.add_typer(images_app, name="images")
app.add_typer(sandboxes_app, name="sandboxes")
app.command("export")(export_command)
app.command()(doctor)
app.command()(view)


def _fail(message: str) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(code=2)


@app.command()
def presets() -> None:
    """List the environment presets."""
    table = Table("preset", "description", "options")
    for preset in list_presets():
        table.add_row(preset.name, preset.description, ", ".join(preset.options) or "-")
    console.print(table)


@app.command()
def run(
    preset: Annotated[str, typer.Argument(help="Preset name (see `ares presets`).")],
    policy: Annotated[
        str, typer.Option("--policy", "-p", help=f"One of: {', '.join(POLICY_NAMES)}.")
    ] = "oracle",
    episodes: Annotated[
        int | None, typer.Option("-n", "--episodes", help="Episodes (default: one per task).")
    ] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", "-c", min=1)] = 8,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    out: Annotated[Path | None, typer.Option("--out", help="Directory for per-episode JSON results.")] = None,
    tasks: Annotated[str | None, typer.Option("--tasks", help="Task selection: 3, 0:10, ids, a,b,c.")] = None,
    shard: Annotated[str | None, typer.Option("--shard", help="Keep shard INDEX/COUNT of the tasks.")] = None,
    step_limit: Annotated[int, typer.Option("--step-limit", min=1)] = 100,
    context_limit: Annotated[
        int | None,
        typer.Option("--context-limit", min=1, help="Policy context window in prompt tokens (default: none)"),
    ] = None,
    path: Annotated[Path | None, typer.Option("--path", help="Dataset directory (harbor preset).")] = None,
    verifier_mode: Annotated[
        str | None,
        typer.Option(
            "--verifier-mode",
            help="harbor preset: what the tests see, 'outputs' (pristine image + the task's outputs) or "
            "'full' (the agent's whole filesystem); default: each task's own setting.",
        ),
    ] = None,
    script: Annotated[
        Path | None, typer.Option("--script", help="JSONL responses (scripted policy).")
    ] = None,
    model: Annotated[str | None, typer.Option("--model", help="Model name (openai policy).")] = None,
    base_url: Annotated[str | None, typer.Option("--base-url", help="API base URL (openai policy).")] = None,
    warm_pool: Annotated[
        int, typer.Option("--warm-pool", min=0, help="Started sandboxes kept ready per worker (0: off).")
    ] = 0,
    sandbox: Annotated[
        str, typer.Option("--sandbox", help=f"Sandbox backend: {', '.join(BACKENDS)}.")
    ] = "local",
    trace: Annotated[
        str, typer.Option("--trace", help="Rollout traces in the trajectories: off, basic, full.")
    ] = "basic",
    resume: Annotated[
        bool, typer.Option("--resume", help="Skip episodes already finished in --out; re-run the others.")
    ] = False,
) -> None:
    """Run PRESET with a policy and report rewards; per-episode results go to --out."""
    preset_options: dict[str, Any] = {
        k: v for k, v in {"path": path, "verifier_mode": verifier_mode}.items() if v is not None
    }
    policy_options: dict[str, Any] = {
        k: v for k, v in {"script": script, "model": model, "base_url": base_url}.items() if v is not None
    }
    try:
        policy_factory = make_policy(policy, **policy_options)
        env = make(preset, tasks=tasks, shard=shard, step_limit=step_limit, **preset_options)
        sandbox_factory = make_sandbox_factory(sandbox)
    except (UnknownPresetError, TaskError, PolicyError, UnknownBackendError) as exc:
        raise _fail(str(exc)) from None
    task_count = len(env.tasks)
    total = episodes if episodes is not None else task_count
    if trace not in ("off", "basic", "full"):
        raise _fail(f"--trace must be off, basic or full, not {trace!r}")
    if resume and out is None:
        raise _fail("--resume needs --out DIR (the run to resume)")
    out_dir = out or Path("runs") / f"{preset}-{policy}-{time.strftime('%Y%m%d-%H%M%S')}"
    (out_dir / "episodes").mkdir(parents=True, exist_ok=True)
    earlier = _finished_results(out_dir) if resume else {}
    collector = JsonDirCollector(out_dir / "trajectories")

    def make_env() -> Any:
        return make(
            preset, tasks=tasks, shard=shard, step_limit=step_limit, context_limit=context_limit,
            warm_pool=warm_pool, sandbox_factory=sandbox_factory, **preset_options,
        )  # fmt: skip

    started = time.perf_counter()
    try:
        results = asyncio.run(
            _run_with_progress(
                make_env, policy_factory, total, concurrency, seed, out_dir,
                collector=collector, trace=trace, skip=earlier,
            )
        )  # fmt: skip
        results = sorted([*earlier.values(), *results], key=lambda r: r.index)
    finally:
        collector.close()  # whatever ended the run, the trajectories written so far are on disk
        close = getattr(sandbox_factory, "close", None)
        if callable(close):
            close()
    summary = RunSummary.of(results, time.perf_counter() - started)
    record = {"preset": preset, "policy": policy, "seed": seed, **dataclasses.asdict(summary)}
    (out_dir / "summary.json").write_text(json.dumps(record, indent=2))
    _print_summary(summary, out_dir)


def _finished_results(out_dir: Path) -> dict[int, EpisodeResult]:
    """Episodes of an earlier run in ``out_dir`` that ended normally (``--resume`` keeps them)."""
    done: dict[int, EpisodeResult] = {}
    for path in sorted((out_dir / "episodes").glob("*.json")):
        try:
            result = EpisodeResult.from_dict(json.loads(path.read_text()))
        except (ValueError, KeyError, json.JSONDecodeError):
            continue  # unreadable: run that episode again
        if result.status in (EpisodeStatus.FINISHED, EpisodeStatus.TRUNCATED):
            done[result.index] = result
    return done


async def _run_with_progress(
    make_env: Any,
    policy_factory: Any,
    total: int,
    concurrency: int,
    seed: int,
    out_dir: Path,
    *,
    collector: JsonDirCollector,
    trace: Any,
    skip: dict[int, EpisodeResult],
) -> list[EpisodeResult]:
    passed = 0
    reward_sum = 0.0
    with Progress(
        TextColumn("[bold]episodes"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"),
        TimeElapsedColumn(), console=console, transient=False,
    ) as progress:  # fmt: skip
        bar = progress.add_task("", total=total, completed=len(skip))
        passed = sum(r.passed for r in skip.values())
        reward_sum = sum(r.reward or 0.0 for r in skip.values())

        def on_result(result: EpisodeResult) -> None:
            nonlocal passed, reward_sum
            passed += result.passed
            reward_sum += result.reward or 0.0
            name = f"{result.index:05d}-{result.task_id}.json"
            tmp = out_dir / "episodes" / f".{name}.tmp"
            tmp.write_text(json.dumps(result.to_dict(), indent=2, default=str))
            os.replace(tmp, out_dir / "episodes" / name)
            done = progress.tasks[bar].completed + 1
            progress.update(
                bar, advance=1, description=f"pass {passed}/{done}  mean reward {reward_sum / done:.3f}"
            )

        try:
            return await run_episodes(
                make_env,
                policy_factory,
                episodes=total,
                concurrency=concurrency,
                seed=seed,
                on_result=on_result,
                collector=collector,
                trace=trace,
                skip=skip.keys(),
            )
        finally:
            closer = getattr(policy_factory, "aclose", None)
            if closer is not None:
                await closer()


def _print_summary(summary: RunSummary, out_dir: Path) -> None:
    table = Table(title="ARES run summary", show_header=False)
    p50 = summary.p50_step_latency_s
    rows = [
        ("episodes", str(summary.episodes)),
        ("mean reward", f"{summary.mean_reward:.3f}"),
        ("pass rate", f"{summary.pass_rate:.1%}"),
        ("statuses", ", ".join(f"{k}={v}" for k, v in sorted(summary.statuses.items()))),
        ("mean steps", f"{summary.mean_steps:.2f}"),
        ("wall time", f"{summary.wall_time_s:.1f}s"),
        ("p50 step latency", "-" if p50 is None else f"{p50 * 1000:.1f} ms"),
        ("results", str(out_dir)),
    ]
    for key, value in rows:
        table.add_row(key, value)
    console.print(table)


def main() -> None:
    try:
        app()
    except AresError as exc:  # pragma: no cover - last-resort guard for library errors
        raise SystemExit(f"error: {exc}") from None


if __name__ == "__main__":
    main()
