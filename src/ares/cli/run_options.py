"""The flags of ``ares run``, one type alias each: ``run()``'s signature names them (Typer reads the
options from it) and ``RunConfig`` has one field per flag, by the same name."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ares.policies import POLICY_NAMES
from ares.rollout.runner import DEFAULT_POLICY_TIMEOUT_S
from ares.sandbox.backends import BACKENDS

PresetOption = Annotated[str, typer.Argument(help="Preset name (see `ares presets`).")]
PolicyOption = Annotated[
    str,
    typer.Option(
        "--policy", "-p", help=f"One of: {', '.join(POLICY_NAMES)}; local:PATH.gguf for another model."
    ),
]
EpisodesOption = Annotated[
    int | None,
    typer.Option("-n", "--episodes", min=1, help="Episodes (default: one per task, x --group-size)."),
]
ConcurrencyOption = Annotated[int, typer.Option("--concurrency", "-c", min=1)]
SeedOption = Annotated[int, typer.Option("--seed")]
OutOption = Annotated[Path | None, typer.Option("--out", help="Directory for per-episode JSON results.")]
TasksOption = Annotated[str | None, typer.Option("--tasks", help="Task selection: 3, 0:10, ids, a,b,c.")]
ShardOption = Annotated[str | None, typer.Option("--shard", help="Keep shard INDEX/COUNT of the tasks.")]
StepLimitOption = Annotated[int, typer.Option("--step-limit", min=1)]
ContextLimitOption = Annotated[
    int | None,
    typer.Option("--context-limit", min=1, help="Policy context window in prompt tokens (default: none)"),
]
ContextBudgetOption = Annotated[
    int | None,
    typer.Option(
        "--context-budget",
        min=1,
        help="Prompt tokens after which the bash/tool agent summarizes and starts over (default: never)",
    ),
]
GroupSizeOption = Annotated[
    int,
    typer.Option("--group-size", "-k", min=1, help="Rollouts per task, run as one group (e.g. for GRPO)."),
]
PathOption = Annotated[
    Path | None,
    typer.Option("--path", help="A Harbor dataset dir (harbor), or an instance file or dir (swebench)."),
]
DatasetOption = Annotated[
    str | None,
    typer.Option(
        "--dataset",
        metavar="NAME[@VERSION]",
        help="harbor presets: a dataset of a Harbor registry, e.g. terminal-bench@2.0, fetched at its "
        "pinned commits into the cache (instead of --path).",
    ),
]
RegistryOption = Annotated[
    str | None,
    typer.Option(
        "--registry",
        metavar="FILE|URL",
        help="--dataset: the Harbor registry.json to resolve it in (default: $ARES_HARBOR_REGISTRY, "
        "else Harbor's public registry).",
    ),
]
SplitOption = Annotated[
    str | None, typer.Option("--split", help="swebench presets: the dataset split (e.g. test).")
]
ImageTemplateOption = Annotated[
    str | None,
    typer.Option(
        "--image-template",
        help="swebench presets: image name for instances without their own, with {instance_id} and "
        "{name}, e.g. 'myregistry:5000/sweb.eval.x86_64.{name}:latest'.",
    ),
]
VerifierModeOption = Annotated[
    str | None,
    typer.Option(
        "--verifier-mode",
        help="What the tests see: 'outputs' (pristine image + the task's outputs), 'full' (the agent's "
        "whole filesystem) or 'in-place' (the agent's own sandbox, which it can tamper with; for "
        "backends that cannot fork); default: each task's own setting.",
    ),
]
ScriptOption = Annotated[Path | None, typer.Option("--script", help="JSONL responses (scripted policy).")]
ModelOption = Annotated[str | None, typer.Option("--model", help="Model name (API policies).")]
BaseUrlOption = Annotated[str | None, typer.Option("--base-url", help="API base URL (API policies).")]
ApiKeyEnvOption = Annotated[
    str | None,
    typer.Option(
        "--api-key-env",
        metavar="NAME",
        help="API policies: read the API key from $NAME (default OPENAI_API_KEY or ANTHROPIC_API_KEY).",
    ),
]
MaxTokensOption = Annotated[
    int | None, typer.Option("--max-tokens", min=1, help="API and local policies: max tokens per answer.")
]
TemperatureOption = Annotated[
    float | None,
    typer.Option("--temperature", min=0.0, help="API and local policies: sampling temperature."),
]
TimeoutOption = Annotated[
    float | None,
    typer.Option("--timeout", min=0.001, help="API policies: seconds per HTTP request (default 600)."),
]
PolicyTimeoutOption = Annotated[
    float | None,
    typer.Option(
        "--policy-timeout",
        min=0.0,
        help=f"Seconds one policy answer may take before its episode ends errored (0: no limit; "
        f"default {DEFAULT_POLICY_TIMEOUT_S:g}, or 4 x --timeout if longer).",
    ),
]
WarmPoolOption = Annotated[
    int, typer.Option("--warm-pool", min=0, help="Started sandboxes kept ready per worker (0: off).")
]
SandboxOption = Annotated[str, typer.Option("--sandbox", help=f"Sandbox backend: {', '.join(BACKENDS)}.")]
TraceOption = Annotated[
    str,
    typer.Option("--rollout-trace", "--trace", help="Rollout traces in the trajectories: off, basic, full."),
]
ResumeOption = Annotated[
    bool, typer.Option("--resume", help="Skip episodes already finished in --out; re-run the others.")
]
AllowErrorsOption = Annotated[
    bool,
    typer.Option("--allow-errors", help="Exit 0 even if episodes errored (they are still reported)."),
]
UseRayOption = Annotated[
    bool, typer.Option("--ray", help="Play on Ray actors (-c is then per actor); see docs/scale.md.")
]
RayAddressOption = Annotated[
    str | None,
    typer.Option(
        "--ray-address",
        metavar="ADDRESS",
        help="--ray: join a running cluster ('auto' or HOST:PORT; default: start a local instance).",
    ),
]
RayActorsOption = Annotated[
    int | None,
    typer.Option("--ray-actors", min=1, help="--ray: actors to start (default: the cluster's CPUs)."),
]
RetriesOption = Annotated[
    int,
    typer.Option("--retries", min=0, help="--ray: replays of an episode lost with its actor."),
]
RefillsOption = Annotated[
    int,
    typer.Option(
        "--refills",
        min=0,
        help="Play an episode the infrastructure failed (blame infra) again, up to N times.",
    ),
]
SamplerOption = Annotated[
    str | None,
    typer.Option(
        "--sampler",
        help="Choose each group's task by pass rate: uniform, in-order, informative (p(1-p)), pools, "
        "skip-solved, with options after a colon (pools:easy=0.9,hard=0.1); the store: OUT/pass_rates.json.",
    ),
]
PassRatesOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--pass-rates",
        help="Seed the run's pass rates from an ares run dir, a tasks validate report or a pass_rates.json "
        "(repeatable).",
    ),
]
TraceFileOption = Annotated[
    Path | None,
    typer.Option(
        "--span-trace",
        "--trace-file",
        help="Write a span trace (Chrome JSON; open in Perfetto) of the run, Ray actors included.",
    ),
]
SpanLevelOption = Annotated[
    str, typer.Option("--span-level", help="--span-trace detail: basic or full (adds every exec).")
]
TrackOption = Annotated[
    list[str] | None,
    typer.Option(
        "--track",
        metavar="SPEC",
        help="Send metrics to jsonl:PATH, tensorboard:DIR or wandb:PROJECT[@DIR] (offline); repeatable.",
    ),
]
StrictOption = Annotated[
    bool,
    typer.Option(
        "--strict", help="Refuse tasks whose task.toml has unknown tables or keys (else: a warning each)."
    ),
]
