"""The ``ares`` command: list presets and run evaluations with a live progress display.

``ares run`` checks its configuration before it starts (a mistake is one ``error:`` line and exit
code 2), shows progress while it runs (plain lines when output is not a terminal), and ends with a
summary that lists each distinct error and the failed and errored tasks. It exits 1 when an
episode errored, unless ``--allow-errors``. Ctrl-C (or SIGTERM) cancels the running episodes, writes a
partial summary and says in one line what was kept and the command that resumes (exit 130).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import typer
from rich.table import Table

from ares import tracing
from ares.cli.common import App, err_console, fail, plain_console, warn, warn_renamed_flags
from ares.cli.curriculum_flags import with_curriculum
from ares.cli.datasets import app as datasets_app
from ares.cli.doctor import doctor
from ares.cli.engine_check import check_engine
from ares.cli.export import export as export_command
from ares.cli.images import app as images_app
from ares.cli.interrupt import interrupted_line, resume_command, sigterm_as_interrupt
from ares.cli.progress import run_progress
from ares.cli.report import print_summary
from ares.cli.run_config import RunConfig
from ares.cli.run_options import (
    AllowErrorsOption,
    ApiKeyEnvOption,
    BaseUrlOption,
    ConcurrencyOption,
    ContextBudgetOption,
    ContextLimitOption,
    DatasetOption,
    EpisodesOption,
    GroupSizeOption,
    ImageTemplateOption,
    MaxTokensOption,
    ModelOption,
    OutOption,
    PassRatesOption,
    PathOption,
    PolicyOption,
    PolicyTimeoutOption,
    PresetOption,
    RayActorsOption,
    RayAddressOption,
    RefillsOption,
    RegistryOption,
    ResumeOption,
    RetriesOption,
    SamplerOption,
    SandboxOption,
    ScriptOption,
    SeedOption,
    ShardOption,
    SpanLevelOption,
    SplitOption,
    StepLimitOption,
    StrictOption,
    TasksOption,
    TemperatureOption,
    TimeoutOption,
    TraceFileOption,
    TraceOption,
    TrackOption,
    UseRayOption,
    VerifierModeOption,
    WarmPoolOption,
)
from ares.cli.sandboxes import app as sandboxes_app
from ares.cli.swe_eval import swe_eval
from ares.cli.task_config import quiet_task_config, reported_task_config
from ares.cli.tasks import app as tasks_app
from ares.cli.trace import app as trace_app
from ares.cli.view import view
from ares.core.closing import AsyncClosable, Closable
from ares.core.status import EpisodeStatus
from ares.errors import AresError
from ares.images.progress import build_listener
from ares.policies import API_POLICIES, make_policy
from ares.policies.base import TokenExactPolicyFactory
from ares.presets import (
    AGENTS,
    SOURCES,
    list_presets,
    preset_agent,
    require_preset_extras,
)
from ares.records.collectors import JsonDirCollector
from ares.rollout.results import EpisodeResult, RunSummary
from ares.rollout.spec import RunSpec
from ares.sandbox.backends import make_sandbox_factory
from ares.tracking import Tracker, Trackers, TrackingError, make_tracker

app = App(help="ARES: RL environments for LLM coding agents.", no_args_is_help=True)
console = plain_console()
app.add_typer(images_app, name="images")
app.add_typer(sandboxes_app, name="sandboxes")
app.add_typer(tasks_app, name="tasks")
app.add_typer(datasets_app, name="datasets")
app.add_typer(trace_app, name="trace")
app.command("export")(export_command)
app.command("eval")(swe_eval)
app.command()(doctor)
app.command()(view)

#: How long the start-up check waits for the LLM server's port.
PREFLIGHT_TIMEOUT_S = 3.0
#: Exit code of a run in which an episode errored (configuration mistakes exit 2).
EXIT_ERRORED = 1
#: Statuses of an episode that ``--resume`` keeps (the others are played again).
RESUMABLE = frozenset({EpisodeStatus.FINISHED, EpisodeStatus.TRUNCATED})


@app.command()
def presets() -> None:
    """List the environment presets: every task source with every agent that fits it, then each
    preset's description and options."""
    title = "presets: a task source x an agent, named SOURCE (bash agent) or SOURCE-AGENT"
    matrix = Table("agent \\ tasks", *(source.name for source in SOURCES), title=title)
    for agent in AGENTS:  # agents down, sources across: the matrix fits an 80-column terminal
        matrix.add_row(agent.name, *("yes" if agent.fits(source) else "-" for source in SOURCES))
    console.print(matrix)
    table = Table("preset", "description", "options")
    for preset in list_presets():
        table.add_row(preset.name, preset.description, ", ".join(preset.options) or "-")
    console.print(table)
    console.print("-: the agent needs a solution file, which these tasks do not name")


@app.command()
def run(
    preset: PresetOption,
    policy: PolicyOption = "oracle",
    episodes: EpisodesOption = None,
    concurrency: ConcurrencyOption = 8,
    seed: SeedOption = 0,
    out: OutOption = None,
    tasks: TasksOption = None,
    shard: ShardOption = None,
    step_limit: StepLimitOption = 100,
    context_limit: ContextLimitOption = None,
    context_budget: ContextBudgetOption = None,
    group_size: GroupSizeOption = 1,
    path: PathOption = None,
    dataset: DatasetOption = None,
    registry: RegistryOption = None,
    split: SplitOption = None,
    image_template: ImageTemplateOption = None,
    verifier_mode: VerifierModeOption = None,
    script: ScriptOption = None,
    model: ModelOption = None,
    base_url: BaseUrlOption = None,
    api_key_env: ApiKeyEnvOption = None,
    max_tokens: MaxTokensOption = None,
    temperature: TemperatureOption = None,
    timeout: TimeoutOption = None,
    policy_timeout: PolicyTimeoutOption = None,
    warm_pool: WarmPoolOption = 0,
    sandbox: SandboxOption = "local",
    trace: TraceOption = "basic",
    resume: ResumeOption = False,
    allow_errors: AllowErrorsOption = False,
    use_ray: UseRayOption = False,
    ray_address: RayAddressOption = None,
    ray_actors: RayActorsOption = None,
    retries: RetriesOption = 0,
    refills: RefillsOption = 0,
    sampler: SamplerOption = None,
    pass_rates: PassRatesOption = None,
    trace_file: TraceFileOption = None,
    span_level: SpanLevelOption = "basic",
    track: TrackOption = None,
    strict: StrictOption = False,
) -> None:
    """Run PRESET with a policy and report rewards; per-episode results go to --out.

    Exits 0 when every episode ran (whatever its reward), 1 when an episode errored (unless
    --allow-errors), 2 on a configuration mistake.
    """
    config = RunConfig(**locals())  # run()'s parameters are RunConfig's fields, by name
    warn_renamed_flags(app.invoked_args or tuple(sys.argv[1:]))
    execute(config)


def execute(config: RunConfig) -> None:
    """Play the run ``config`` describes, write its results and summary, and report them."""
    if config.use_ray:
        _start_ray(config.ray_address)
    if config.trace_file is not None:
        try:
            tracing.configure(config.span_level, process=f"ares run (pid {os.getpid()})")  # type: ignore[arg-type]
        except AresError as exc:
            raise fail(str(exc)) from None
    policy_factory, spec, sandbox_factory = _load(config)
    total = spec.total_episodes
    out_dir = config.out_dir()
    try:
        spec = with_curriculum(spec, config.sampler, config.pass_rates or (), out_dir, resume=config.resume)
    except (AresError, ValueError) as exc:
        raise fail(str(exc)) from None
    (out_dir / "episodes").mkdir(parents=True, exist_ok=True)
    earlier = _finished_results(out_dir) if config.resume else {}
    collector = JsonDirCollector(out_dir / "trajectories")
    tracker = _make_trackers(
        list(config.track_specs), config.tracker_config(total, out_dir), out_dir, earlier.values()
    )
    trace_parts: list[list[dict[str, Any]]] = []
    play = _Play(spec, policy_factory, sandbox_factory, out_dir, earlier, tracker)
    started = time.perf_counter()
    interrupted = False
    try:
        with sigterm_as_interrupt() as interruption, quiet_task_config():
            results = play.run(collector, trace_parts.append)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the running episodes were cancelled
        results, interrupted = play.results_so_far(), True
    except AresError as exc:  # e.g. no Ray actor could start
        tracker.close()
        raise fail(str(exc)) from None
    except BaseException:
        tracker.close()
        raise
    finally:
        collector.close()  # whatever ended the run, the trajectories written so far are on disk
        if isinstance(sandbox_factory, Closable):
            sandbox_factory.close()
        if config.trace_file is not None:
            _write_trace(config.trace_file, trace_parts)
    wall_time_s = time.perf_counter() - started
    if interrupted:
        _report_interrupted(config, results, wall_time_s, out_dir, total, tracker)
        raise typer.Exit(code=interruption.exit_code)
    _report(config, results, wall_time_s, out_dir, tracker)


def _load(config: RunConfig) -> tuple[Any, RunSpec, Any]:
    """The policy factory, the run's spec (its tasks loaded and selected once, for every
    environment) and the sandbox factory; a mistake they find (a task selector out of range, an
    agent or extra that does not fit, a missing model file, a backend not installed, a server that
    cannot be resolved, an engine that does not answer) fails the run before it starts. A local
    policy knows its model's template and tokenizer: its runs are token exact by default."""
    try:
        policy_factory = make_policy(config.policy, **config.policy_options)
        require_preset_extras(config.preset)
        preset_agent(config.preset, context_budget=config.context_budget)
        renderer = None
        if isinstance(policy_factory, TokenExactPolicyFactory):
            renderer = policy_factory.token_renderer()
        with reported_task_config(config.strict):
            spec = config.run_spec(renderer)
        sandbox_factory = make_sandbox_factory(config.sandbox)
    except AresError as exc:
        raise fail(str(exc)) from None
    if config.policy in API_POLICIES:
        _check_server(policy_factory.client.base_url)  # type: ignore[attr-defined]
    check_engine(config.sandbox, sandbox_factory)
    return policy_factory, spec, sandbox_factory


def _report(
    config: RunConfig, results: list[EpisodeResult], wall_time_s: float, out_dir: Path, tracker: Trackers
) -> None:
    """Write summary.json, log the summary, print it; exit 1 when an episode errored (unless
    --allow-errors)."""
    summary = _write_summary(config, results, wall_time_s, out_dir, planned=len(results), interrupted=False)
    tracker.log_summary(summary, results)
    tracker.close()
    print_summary(console, summary, out_dir)
    if summary.errored and not config.allow_errors:
        raise typer.Exit(code=EXIT_ERRORED)


def _report_interrupted(
    config: RunConfig,
    results: list[EpisodeResult],
    wall_time_s: float,
    out_dir: Path,
    total: int,
    tracker: Trackers,
) -> None:
    """A partial summary.json (``interrupted``), and one line: what was kept, how to continue."""
    _write_summary(config, results, wall_time_s, out_dir, planned=total, interrupted=True)
    tracker.close()  # no run summary is logged: the run is not over
    kept = sum(1 for r in results if r.status in RESUMABLE)
    args = app.invoked_args or tuple(sys.argv[1:])
    command = resume_command(args, out_dir, out_given=config.out is not None)
    err_console.print(interrupted_line(kept, total, out_dir, command))


def _write_summary(
    config: RunConfig,
    results: list[EpisodeResult],
    wall_time_s: float,
    out_dir: Path,
    *,
    planned: int,
    interrupted: bool,
) -> RunSummary:
    """summary.json: the run's numbers over ``results``, with the episodes it planned and whether it
    was interrupted (then ``episodes`` counts only those that ended before the interrupt)."""
    summary = RunSummary.of(results, wall_time_s)
    record = {"preset": config.preset, "policy": config.policy, "seed": config.seed}
    extent = {"planned_episodes": planned, "interrupted": interrupted}
    text = json.dumps({**record, **dataclasses.asdict(summary), **extent}, indent=2)
    tmp = out_dir / ".summary.json.tmp"
    tmp.write_text(text)
    os.replace(tmp, out_dir / "summary.json")  # a second Ctrl-C never leaves half a summary
    return summary


def _check_server(base_url: str) -> None:
    """A cheap look at the LLM server: a host name that does not resolve is a mistake (exit 2); a
    port nobody listens on yet gets a warning, since the server may still be starting."""
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise fail(f"--base-url {base_url}: bad port; use e.g. http://localhost:8000/v1") from None
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise fail(f"--base-url {base_url}: cannot resolve host {host!r} ({exc}); check the URL") from None
    family, kind, proto, _name, address = addresses[0]
    try:
        with socket.socket(family, kind, proto) as probe:
            probe.settimeout(PREFLIGHT_TIMEOUT_S)
            probe.connect(address)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        warn(
            f"nothing answers at {host}:{port} ({reason}) for --base-url {base_url}; episodes will error "
            "until the server is up"
        )


def _make_trackers(specs: list[Any], config: dict[str, Any], out_dir: Path, earlier: Any) -> Trackers:
    """The ``--track`` sinks as one (a missing library is a one-line error, exit 2); episodes an
    earlier run finished (``--resume``) are logged first, so the tracked run is whole."""
    made: list[Tracker] = []
    try:
        for spec in specs:
            made.append(make_tracker(spec, config=config, default_dir=out_dir))
    except TrackingError as exc:
        for tracker in made:
            tracker.close()
        raise fail(str(exc)) from None
    sinks = Trackers(
        made, names=[str(s) for s in specs], on_error=lambda name, exc: warn(f"--track {name}: {exc}")
    )
    for result in earlier:
        sinks.log_episode(result)
    return sinks


def _finished_results(out_dir: Path) -> dict[int, EpisodeResult]:
    """Episodes of an earlier run in ``out_dir`` that ended normally (``--resume`` keeps them)."""
    done: dict[int, EpisodeResult] = {}
    for path in sorted((out_dir / "episodes").glob("*.json")):
        try:
            result = EpisodeResult.from_dict(json.loads(path.read_text()))
        except (ValueError, KeyError, json.JSONDecodeError):
            continue  # unreadable: run that episode again
        if result.status in RESUMABLE:
            done[result.index] = result
    return done


class _Play:
    """The run's episodes played (``RunSpec.play``: here or on Ray) with a live progress display;
    each result is written to ``out_dir/episodes`` and logged as it comes."""

    def __init__(
        self, spec: RunSpec, policy_factory: Any, sandbox_factory: Any, out_dir: Path,
        earlier: dict[int, EpisodeResult], tracker: Tracker,
    ) -> None:  # fmt: skip
        self.spec, self.policy_factory, self.sandbox_factory = spec, policy_factory, sandbox_factory
        self.out_dir, self.earlier, self.tracker = out_dir, earlier, tracker
        self.progress = run_progress(console, spec.total_episodes, earlier.values())
        self._played: list[EpisodeResult] = []

    def run(self, collector: JsonDirCollector, on_trace: Callable[[Any], None]) -> list[EpisodeResult]:
        """All results, the earlier run's (``--resume``) included, in episode order."""
        with self.progress, build_listener(self.progress.on_build):
            results = asyncio.run(self._play(collector, on_trace))
        return sorted([*self.earlier.values(), *results], key=lambda r: r.index)

    def results_so_far(self) -> list[EpisodeResult]:
        """What ``run`` would return had it not been interrupted: the episodes that ended, in order."""
        return sorted([*self.earlier.values(), *self._played], key=lambda r: r.index)

    async def _play(
        self, collector: JsonDirCollector, on_trace: Callable[[Any], None]
    ) -> list[EpisodeResult]:
        try:
            return await self.spec.play(
                self.policy_factory, sandbox_factory=self.sandbox_factory, on_result=self._on_result,
                collector=collector, skip=self.earlier.keys(), keep_records=False,  # each result is on disk
                on_trace_events=on_trace,
            )  # fmt: skip
        finally:
            if isinstance(self.policy_factory, AsyncClosable):
                await self.policy_factory.aclose()

    def _on_result(self, result: EpisodeResult) -> None:
        name = f"{result.index:05d}-{result.task_id}.json"
        tmp = self.out_dir / "episodes" / f".{name}.tmp"
        tmp.write_text(json.dumps(result.to_dict(), indent=2, default=str))
        os.replace(tmp, self.out_dir / "episodes" / name)
        self._played.append(dataclasses.replace(result, record={}))  # on disk; keep only its numbers
        self.progress.on_result(result)
        self.tracker.log_episode(result)


def _write_trace(path: Path, parts: list[list[dict[str, Any]]]) -> None:
    """This process's spans and the actors' on one timeline, in one file; tracing then stops."""
    try:
        tracing.write_trace(path, tracing.merge_traces([tracing.drain(), *parts]))
    finally:
        tracing.shutdown()
    console.print(f"span trace: {path} (open it in https://ui.perfetto.dev)")


def _start_ray(address: str | None) -> None:
    """Connect to Ray before anything is built: a new local instance, or a running cluster."""
    try:
        import ray
    except ImportError:
        raise fail("--ray needs Ray: pip install 'ares[ray]'") from None
    try:
        ray.init(address=address, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise fail(f"--ray-address {address}: cannot connect to Ray: {reason}") from None


def main() -> None:
    try:
        app()
    except AresError as exc:  # pragma: no cover - last-resort guard for library errors
        raise SystemExit(f"error: {exc}") from None


if __name__ == "__main__":
    main()
