"""The ``ares`` command: list presets and run evaluations with a live progress display.

``ares run`` checks its configuration before it starts (a mistake is one ``error:`` line and exit
code 2), shows progress while it runs (plain lines when output is not a terminal), and ends with a
summary that lists each distinct error and the failed and errored tasks. It exits 1 when an
episode errored, unless ``--allow-errors``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import socket
import time
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

import typer
from rich.console import Console
from rich.table import Table

from ares import tracing
from ares.cli.common import App, fail, warn
from ares.cli.doctor import doctor
from ares.cli.export import export as export_command
from ares.cli.images import app as images_app
from ares.cli.progress import RunProgress, run_progress
from ares.cli.report import print_summary
from ares.cli.sandboxes import app as sandboxes_app
from ares.cli.trace import app as trace_app
from ares.cli.view import view
from ares.core.status import EpisodeStatus
from ares.errors import AresError, SandboxUnavailableError
from ares.policies import API_POLICIES, LOCAL_OPTIONS, LOCAL_POLICY, POLICY_NAMES, make_policy, split_policy
from ares.records.collectors import JsonDirCollector
from ares.registry import get_preset, list_presets, make
from ares.rollout.runner import DEFAULT_POLICY_TIMEOUT_S, EpisodeResult, RunSummary, run_episodes
from ares.sandbox.backends import BACKENDS, make_sandbox_factory
from ares.sandbox.images.progress import build_listener
from ares.tracking import Tracker, Trackers, TrackingError, make_tracker, parse_track_spec

app = App(help="ARES: RL environments for LLM coding agents.", no_args_is_help=True)
console = Console()
app.add_typer(images_app, name="images")
app.add_typer(sandboxes_app, name="sandboxes")
app.add_typer(trace_app, name="trace")
app.command("export")(export_command)
app.command()(doctor)
app.command()(view)

TRACE_LEVELS = ("off", "basic", "full")
VERIFIER_MODES = ("outputs", "full")
#: How long the start-up check waits for the LLM server's port.
PREFLIGHT_TIMEOUT_S = 3.0
#: Exit code of a run in which an episode errored (configuration mistakes exit 2).
EXIT_ERRORED = 1


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
        str,
        typer.Option(
            "--policy", "-p", help=f"One of: {', '.join(POLICY_NAMES)}; local:PATH.gguf for another model."
        ),
    ] = "oracle",
    episodes: Annotated[
        int | None,
        typer.Option("-n", "--episodes", min=1, help="Episodes (default: one per task, x --group-size)."),
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
    group_size: Annotated[
        int,
        typer.Option(
            "--group-size", "-k", min=1, help="Rollouts per task, run as one group (e.g. for GRPO)."
        ),
    ] = 1,
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
    model: Annotated[str | None, typer.Option("--model", help="Model name (API policies).")] = None,
    base_url: Annotated[str | None, typer.Option("--base-url", help="API base URL (API policies).")] = None,
    api_key_env: Annotated[
        str | None,
        typer.Option(
            "--api-key-env",
            metavar="NAME",
            help="API policies: read the API key from $NAME (default OPENAI_API_KEY or ANTHROPIC_API_KEY).",
        ),
    ] = None,
    max_tokens: Annotated[
        int | None, typer.Option("--max-tokens", min=1, help="API and local policies: max tokens per answer.")
    ] = None,
    temperature: Annotated[
        float | None,
        typer.Option("--temperature", min=0.0, help="API and local policies: sampling temperature."),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option("--timeout", min=0.001, help="API policies: seconds per HTTP request (default 600)."),
    ] = None,
    policy_timeout: Annotated[
        float | None,
        typer.Option(
            "--policy-timeout",
            min=0.0,
            help=f"Seconds one policy answer may take before its episode ends errored (0: no limit; "
            f"default {DEFAULT_POLICY_TIMEOUT_S:g}, or 4 x --timeout if longer).",
        ),
    ] = None,
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
    allow_errors: Annotated[
        bool,
        typer.Option("--allow-errors", help="Exit 0 even if episodes errored (they are still reported)."),
    ] = False,
    use_ray: Annotated[
        bool, typer.Option("--ray", help="Play on Ray actors (-c is then per actor); see docs/scale.md.")
    ] = False,
    ray_address: Annotated[
        str | None,
        typer.Option(
            "--ray-address",
            metavar="ADDRESS",
            help="--ray: join a running cluster ('auto' or HOST:PORT; default: start a local instance).",
        ),
    ] = None,
    ray_actors: Annotated[
        int | None,
        typer.Option("--ray-actors", min=1, help="--ray: actors to start (default: the cluster's CPUs)."),
    ] = None,
    retries: Annotated[
        int,
        typer.Option("--retries", min=0, help="--ray: replays of an episode lost with its actor."),
    ] = 0,
    trace_file: Annotated[
        Path | None,
        typer.Option(
            "--trace-file",
            help="Write a span trace (Chrome JSON; open in Perfetto) of the run, Ray actors included.",
        ),
    ] = None,
    span_level: Annotated[
        str, typer.Option("--span-level", help="--trace-file detail: basic or full (adds every exec).")
    ] = "basic",
    track: Annotated[
        list[str] | None,
        typer.Option(
            "--track",
            metavar="SPEC",
            help="Send metrics to jsonl:PATH, tensorboard:DIR or wandb:PROJECT[@DIR] (offline); repeatable.",
        ),
    ] = None,
) -> None:
    """Run PRESET with a policy and report rewards; per-episode results go to --out.

    Exits 0 when every episode ran (whatever its reward), 1 when an episode errored (unless
    --allow-errors), 2 on a configuration mistake.
    """
    preset_options = {"path": path, "verifier_mode": verifier_mode}
    openai_options = {
        "--model": model, "--base-url": base_url, "--api-key-env": api_key_env, "--max-tokens": max_tokens,
        "--temperature": temperature, "--timeout": timeout,
    }  # fmt: skip
    _check_options(policy, preset, preset_options, openai_options, script=script, trace=trace)
    if resume and out is None:
        raise fail("--resume needs --out DIR (the run to resume)")
    if not use_ray and (ray_actors is not None or retries or ray_address is not None):
        raise fail("--ray-address, --ray-actors and --retries go with --ray")
    if span_level not in ("basic", "full"):
        raise fail(f"--span-level must be basic or full, not {span_level!r}")
    if use_ray:
        _start_ray(ray_address)
    if trace_file is not None:
        try:
            tracing.configure(span_level, process=f"ares run (pid {os.getpid()})")  # type: ignore[arg-type]
        except AresError as exc:
            raise fail(str(exc)) from None
    trace_parts: list[list[dict[str, Any]]] = []
    try:
        track_specs = [parse_track_spec(spec) for spec in track or ()]
    except TrackingError as exc:
        raise fail(str(exc)) from None
    policy_options: dict[str, Any] = {"script": script} if script is not None else {}
    if policy.partition(":")[0] == LOCAL_POLICY:
        names = {"max_tokens": max_tokens, "temperature": temperature}
        policy_options = {k: v for k, v in names.items() if k in LOCAL_OPTIONS and v is not None}
    if policy in API_POLICIES:
        names = {"model": model, "base_url": base_url, "api_key_env": api_key_env}
        names |= {"max_tokens": max_tokens, "temperature": temperature, "timeout_s": timeout}
        policy_options = {k: v for k, v in names.items() if v is not None}
    options = {k: v for k, v in preset_options.items() if v is not None}
    try:
        policy_factory = make_policy(policy, **policy_options)
        env = make(preset, tasks=tasks, shard=shard, step_limit=step_limit, **options)
        sandbox_factory = make_sandbox_factory(sandbox)
    except AresError as exc:
        raise fail(str(exc)) from None
    if policy in API_POLICIES:
        _check_server(policy_factory.client.base_url)  # type: ignore[attr-defined]
    _check_engine(sandbox, sandbox_factory)
    task_count = len(env.tasks)
    total = episodes if episodes is not None else task_count * group_size
    if total % group_size:
        raise fail(f"-n {total} is not a multiple of --group-size {group_size} (groups are whole)")
    if policy_timeout is None:
        policy_timeout = max(DEFAULT_POLICY_TIMEOUT_S, 4 * (timeout or 0.0))
    out_dir = out or Path("runs") / f"{preset}-{split_policy(policy)[0]}-{time.strftime('%Y%m%d-%H%M%S')}"
    (out_dir / "episodes").mkdir(parents=True, exist_ok=True)
    earlier = _finished_results(out_dir) if resume else {}
    collector = JsonDirCollector(out_dir / "trajectories")
    run_config = {"preset": preset, "policy": policy, "seed": seed, "episodes": total, "out": str(out_dir)}
    tracker = _make_trackers(track_specs, run_config, out_dir, earlier.values())
    # A local policy knows its model's template and tokenizer: its runs are token exact by default.
    renderer = policy_factory.token_renderer() if hasattr(policy_factory, "token_renderer") else None
    if renderer is not None:
        options["token_renderer"] = renderer

    def make_env() -> Any:
        return make(
            preset, tasks=tasks, shard=shard, step_limit=step_limit, context_limit=context_limit,
            warm_pool=warm_pool, sandbox_factory=sandbox_factory, **options,
        )  # fmt: skip

    ray_options = None
    if use_ray:
        from ares.rollout.ray import PresetEnv

        ray_options = {"actors": ray_actors, "retries": retries, "on_trace_events": trace_parts.append}
        make_env = PresetEnv(  # type: ignore[assignment]  # picklable: actors build their own backend
            preset, sandbox, {"tasks": tasks, "shard": shard, "step_limit": step_limit,
                              "context_limit": context_limit, "warm_pool": warm_pool, **options},
        )  # fmt: skip
    started = time.perf_counter()
    progress = run_progress(console, total, earlier.values())
    try:
        with progress, build_listener(progress.on_build):
            results = asyncio.run(
                _run(
                    make_env, policy_factory, progress, total, concurrency, seed, out_dir,
                    collector=collector, trace=trace, skip=earlier, group_size=group_size,
                    policy_timeout_s=policy_timeout or None, num_tasks=task_count, tracker=tracker,
                    ray=ray_options,
                )
            )  # fmt: skip
        results = sorted([*earlier.values(), *results], key=lambda r: r.index)
    except AresError as exc:  # e.g. no Ray actor could start
        tracker.close()
        raise fail(str(exc)) from None
    except BaseException:
        tracker.close()
        raise
    finally:
        collector.close()  # whatever ended the run, the trajectories written so far are on disk
        close = getattr(sandbox_factory, "close", None)
        if callable(close):
            close()
        if trace_file is not None:
            _write_trace(trace_file, trace_parts)
    summary = RunSummary.of(results, time.perf_counter() - started)
    record = {"preset": preset, "policy": policy, "seed": seed, **dataclasses.asdict(summary)}
    (out_dir / "summary.json").write_text(json.dumps(record, indent=2))
    tracker.log_summary(summary, results)
    tracker.close()
    print_summary(console, summary, out_dir)
    if summary.errored and not allow_errors:
        raise typer.Exit(code=EXIT_ERRORED)


def _check_options(
    policy: str,
    preset: str,
    preset_options: dict[str, Any],
    openai_options: dict[str, Any],
    *,
    script: Path | None,
    trace: str,
) -> None:
    """Mistakes that need no loading: unknown names, options that do not apply, bad values."""
    try:
        spec = get_preset(preset)
    except AresError as exc:
        raise fail(str(exc)) from None
    try:
        base_policy = split_policy(policy)[0]
    except AresError as exc:
        raise fail(str(exc)) from None
    if base_policy not in POLICY_NAMES:
        raise fail(
            f"unknown policy {policy!r}; choose one of: {', '.join(POLICY_NAMES)} (or local:PATH.gguf)"
        )
    for name, value in preset_options.items():
        if value is not None and name not in spec.options:
            flag = "--" + name.replace("_", "-")
            owners = [p.name for p in list_presets() if name in p.options]
            which = f"the {owners[0]} preset" if len(owners) == 1 else f"the presets {', '.join(owners)}"
            raise fail(f"{flag} applies to {which} only, not {preset!r}")
    mode = preset_options.get("verifier_mode")
    if mode is not None and mode not in VERIFIER_MODES:
        raise fail(f"--verifier-mode must be one of: {', '.join(VERIFIER_MODES)}; got {mode!r}")
    path = preset_options.get("path")
    if "path" in spec.options and path is None:
        raise fail(f"the {preset} preset needs a dataset directory: --path DIR")
    if path is not None and not path.is_dir():
        raise fail(f"--path {path} is not a directory (a Harbor dataset dir or a task dir)")
    if script is not None and policy != "scripted":
        raise fail(f"--script applies to --policy scripted only, not {policy!r}")
    if policy == "scripted" and script is None:
        raise fail("--policy scripted needs --script FILE.jsonl (one response per line)")
    given = [flag for flag, value in openai_options.items() if value is not None]
    if base_policy == LOCAL_POLICY:  # the local policy takes --max-tokens and --temperature only
        given = [flag for flag in given if flag.removeprefix("--").replace("-", "_") not in LOCAL_OPTIONS]
    if given and policy not in API_POLICIES:
        verb = "applies" if len(given) == 1 else "apply"
        others = ", ".join(API_POLICIES[1:])
        raise fail(f"{', '.join(given)} {verb} to --policy openai only (and the SDK policies {others})")
    if trace not in TRACE_LEVELS:
        raise fail(f"--trace must be one of: {', '.join(TRACE_LEVELS)}; got {trace!r}")
    env_name = openai_options.get("--api-key-env")
    if env_name is not None and not os.environ.get(env_name):
        raise fail(f"--api-key-env {env_name}: ${env_name} is not set (or empty); export {env_name}=YOUR_KEY")


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


#: Environment variables a cloud backend needs (any one of the alternatives), as its sandboxes say.
CLOUD_CREDENTIALS = {
    "daytona": ((("DAYTONA_API_KEY",), ("DAYTONA_JWT_TOKEN", "DAYTONA_ORGANIZATION_ID")), "DAYTONA_API_KEY"),
    "e2b": ((("E2B_API_KEY",),), "E2B_API_KEY"),
}


def _check_engine(sandbox: str, factory: Any) -> None:
    """A backend that cannot work (no engine answers, no cloud credentials) fails now, not once per
    episode."""
    if sandbox in CLOUD_CREDENTIALS:
        alternatives, main = CLOUD_CREDENTIALS[sandbox]
        if not any(all(os.environ.get(name) for name in names) for names in alternatives):
            raise fail(f"the {sandbox} sandbox backend needs credentials: export {main}=YOUR_KEY")
    engine = getattr(factory, "engine", None)
    if sandbox != "docker" or engine is None:
        return
    try:
        engine.client_blocking()
    except SandboxUnavailableError as exc:
        raise fail(str(exc)) from None


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
        if result.status in (EpisodeStatus.FINISHED, EpisodeStatus.TRUNCATED):
            done[result.index] = result
    return done


async def _run(
    make_env: Any,
    policy_factory: Any,
    progress: RunProgress,
    total: int,
    concurrency: int,
    seed: int,
    out_dir: Path,
    *,
    collector: JsonDirCollector,
    trace: Any,
    skip: dict[int, EpisodeResult],
    group_size: int,
    policy_timeout_s: float | None,
    num_tasks: int,
    tracker: Tracker | None = None,
    ray: dict[str, Any] | None = None,
) -> list[EpisodeResult]:
    def on_result(result: EpisodeResult) -> None:
        name = f"{result.index:05d}-{result.task_id}.json"
        tmp = out_dir / "episodes" / f".{name}.tmp"
        tmp.write_text(json.dumps(result.to_dict(), indent=2, default=str))
        os.replace(tmp, out_dir / "episodes" / name)
        progress.on_result(result)
        if tracker is not None:
            tracker.log_episode(result)

    runner: Any = run_episodes
    extra: dict[str, Any] = {"keep_records": False}  # each result is on disk: keep no episode dicts
    if ray is not None:
        from ares.rollout.ray import run_episodes_ray

        runner, extra = run_episodes_ray, {**extra, **ray}
    try:
        return await runner(
            make_env, policy_factory, episodes=total, concurrency=concurrency, seed=seed,
            on_result=on_result, collector=collector, trace=trace, skip=skip.keys(),
            group_size=group_size, policy_timeout_s=policy_timeout_s, num_tasks=num_tasks, **extra,
        )  # fmt: skip
    finally:
        closer = getattr(policy_factory, "aclose", None)
        if closer is not None:
            await closer()


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
