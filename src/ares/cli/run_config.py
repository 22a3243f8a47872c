"""RunConfig: one ``ares run`` as checked values, built from its flags before anything is loaded;
``run_spec()`` turns them into the library's ``RunSpec`` (``ares.rollout.spec``).

A ``RunConfig`` that exists is consistent: each mistake that needs no loading (an unknown name, an
option that does not apply, a bad value, a missing file or key) is refused as it is built, with
one ``error:`` line and exit code 2 (``ares.cli.common.fail``). What the flags imply (the policy's
and the preset's options, the policy timeout, the output directory) is derived here, in one place.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ares.cli.common import fail
from ares.cli.policy_flags import PolicyFlags
from ares.errors import AresError
from ares.llm.tokens import TokenRenderer
from ares.policies import split_policy
from ares.presets import SOURCES, Preset, get_preset
from ares.rollout.runner import DEFAULT_POLICY_TIMEOUT_S
from ares.rollout.spec import RaySettings, RunSpec
from ares.tasks.model import VERIFIER_MODES
from ares.tracking import TrackingError, TrackSpec, parse_track_spec

TRACE_LEVELS = ("off", "basic", "full")
SPAN_LEVELS = ("basic", "full")


@dataclass(frozen=True, slots=True)
class RunConfig:
    """The flags of ``ares run`` (one field each, named as in ``run()``), checked when built."""

    preset: str
    policy: str = "oracle"
    episodes: int | None = None
    concurrency: int = 8
    seed: int = 0
    out: Path | None = None
    tasks: str | None = None
    shard: str | None = None
    step_limit: int = 100
    context_limit: int | None = None
    context_budget: int | None = None
    group_size: int = 1
    path: Path | None = None
    dataset: str | None = None
    registry: str | None = None
    split: str | None = None
    image_template: str | None = None
    verifier_mode: str | None = None
    script: Path | None = None
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    timeout: float | None = None
    policy_timeout: float | None = None
    warm_pool: int = 0
    sandbox: str = "local"
    trace: str = "basic"
    resume: bool = False
    allow_errors: bool = False
    use_ray: bool = False
    ray_address: str | None = None
    ray_actors: int | None = None
    retries: int = 0
    refills: int = 0
    sampler: str | None = None
    pass_rates: list[Path] | None = None
    trace_file: Path | None = None
    span_level: str = "basic"
    track: list[str] | None = None
    strict: bool = False
    #: ``track`` parsed (not a flag of its own).
    track_specs: tuple[TrackSpec, ...] = field(init=False, default=())

    def __post_init__(self) -> None:
        spec = _preset(self.preset)
        _ = self.policy_flags  # built to check the policy, its script and API flags
        self._check_preset_options(spec)
        if self.trace not in TRACE_LEVELS:
            raise fail(f"--rollout-trace must be one of: {', '.join(TRACE_LEVELS)}; got {self.trace!r}")
        if self.resume and self.out is None:
            raise fail("--resume needs --out DIR (the run to resume)")
        if not self.use_ray and (self.ray_actors is not None or self.retries or self.ray_address is not None):
            raise fail("--ray-address, --ray-actors and --retries go with --ray")
        if self.span_level not in SPAN_LEVELS:
            raise fail(f"--span-level must be basic or full, not {self.span_level!r}")
        try:
            specs = tuple(parse_track_spec(spec) for spec in self.track or ())
        except TrackingError as exc:
            raise fail(str(exc)) from None
        object.__setattr__(self, "track_specs", specs)  # frozen: set once, as it is built
        if self.episodes is not None:
            self.total_episodes(0)  # -n must be whole groups; checked before anything loads

    # ------------------------------------------------------------------ checks
    def _check_preset_options(self, spec: Preset) -> None:
        for option, value in self._preset_flags.items():
            if value is not None and option not in spec.options:
                sources = [s.name for s in SOURCES if option in s.options]
                which = f"the {' and '.join(sources)} presets ({', '.join(f'{s}, {s}-*' for s in sources)})"
                raise fail(f"--{option.replace('_', '-')} applies to {which} only, not {self.preset!r}")
        if self.verifier_mode is not None and self.verifier_mode not in VERIFIER_MODES:
            raise fail(
                f"--verifier-mode must be one of: {', '.join(VERIFIER_MODES)}; got {self.verifier_mode!r}"
            )
        swe = "image_template" in spec.options  # the swebench presets: a file or a dir
        if "dataset" in spec.options:
            self._check_dataset_options()
        elif "path" in spec.options and self.path is None:
            need = "an instance file or dir: --path FILE|DIR" if swe else "a dataset directory: --path DIR"
            raise fail(f"the {self.preset} preset needs {need}")
        if self.path is not None and swe and not self.path.exists():
            raise fail(f"--path {self.path} does not exist (a .jsonl/.json/.parquet file or a dataset dir)")
        if self.path is not None and not swe and not self.path.is_dir():
            raise fail(f"--path {self.path} is not a directory (a Harbor dataset dir or a task dir)")

    def _check_dataset_options(self) -> None:
        """The harbor presets take a dataset dir (--path) or a registry dataset (--dataset), not both."""
        if self.path is not None and self.dataset is not None:
            raise fail("--path and --dataset are alternatives: give a dataset directory or a dataset name")
        if self.registry is not None and self.dataset is None:
            raise fail("--registry goes with --dataset NAME@VERSION (the dataset to resolve in it)")
        if self.path is None and self.dataset is None:
            raise fail(f"the {self.preset} preset needs a dataset: --path DIR or --dataset NAME@VERSION")
        if self.dataset is not None and not self.dataset.strip().partition("@")[0]:
            raise fail(f"--dataset {self.dataset!r}: give a dataset name, e.g. terminal-bench@2.0")

    # ------------------------------------------------------------------ what the flags imply
    @property
    def policy_flags(self) -> PolicyFlags:
        """The policy and its flags (checked as built: ``ares.cli.policy_flags``)."""
        return PolicyFlags(
            self.policy, script=self.script, model=self.model, base_url=self.base_url,
            api_key_env=self.api_key_env, max_tokens=self.max_tokens, temperature=self.temperature,
            timeout=self.timeout,
        )  # fmt: skip

    @property
    def preset_options(self) -> dict[str, Any]:
        """The options for ``make(preset, **them)`` that were given: the preset's own (``path``) and
        ``verifier_mode``, which ``make`` applies to every preset's tasks."""
        given = {**self._preset_flags, "verifier_mode": self.verifier_mode}
        return {name: value for name, value in given.items() if value is not None}

    @property
    def task_options(self) -> dict[str, Any]:
        """``load_tasks(preset, **them)``: the task selection and the preset options the flags give."""
        return {"tasks": self.tasks, "shard": self.shard, **self.preset_options}

    @property
    def env_options(self) -> dict[str, Any]:
        """``make(preset, task_list=..., **them)``: the limits the flags give (the tasks are loaded
        once, by ``load_tasks``, and shared by every environment of the run)."""
        return {
            "step_limit": self.step_limit, "context_limit": self.context_limit,
            "context_budget": self.context_budget, "warm_pool": self.warm_pool,
        }  # fmt: skip

    @property
    def _given_preset_flags(self) -> dict[str, Any]:
        return {name: value for name, value in self._preset_flags.items() if value is not None}

    @property
    def _preset_flags(self) -> dict[str, Any]:
        """The flags that are options of some presets (``Preset.options``), by option name."""
        return {
            "path": self.path, "dataset": self.dataset, "registry": self.registry, "split": self.split,
            "image_template": self.image_template,
        }  # fmt: skip

    @property
    def policy_options(self) -> dict[str, Any]:
        """``make_policy(policy, **them)``: the options the chosen policy takes that were given."""
        return self.policy_flags.options

    @property
    def policy_timeout_s(self) -> float | None:
        """Seconds one policy answer may take (None: no limit); by default 4 x --timeout if longer."""
        chosen = self.policy_timeout
        if chosen is None:
            chosen = max(DEFAULT_POLICY_TIMEOUT_S, 4 * (self.timeout or 0.0))
        return chosen or None

    def run_spec(self, token_renderer: TokenRenderer | None = None) -> RunSpec:
        """The run these flags describe, its tasks loaded once (``RunSpec.load``): the library's
        spec that every environment, here or on a Ray actor, is built from."""
        ray = RaySettings(self.ray_actors, self.retries) if self.use_ray else None
        spec = RunSpec.load(
            self.preset, tasks=self.tasks, shard=self.shard, verifier_mode=self.verifier_mode,  # type: ignore[arg-type]
            preset_options=self._given_preset_flags, limits=self.env_options, sandbox=self.sandbox,
            episodes=self.episodes, group_size=self.group_size, concurrency=self.concurrency, seed=self.seed,
            trace=self.trace, policy_timeout_s=self.policy_timeout_s, ray=ray, refills=self.refills,
        )  # fmt: skip
        return spec.with_renderer(token_renderer)

    def total_episodes(self, task_count: int) -> int:
        """``-n``, or one group per task; groups are whole."""
        total = self.episodes if self.episodes is not None else task_count * self.group_size
        if total % self.group_size:
            raise fail(f"-n {total} is not a multiple of --group-size {self.group_size} (groups are whole)")
        return total

    def out_dir(self) -> Path:
        """``--out``, or a new directory under runs/ named after the preset, policy and time."""
        if self.out is not None:
            return self.out
        return Path("runs") / f"{self.preset}-{split_policy(self.policy)[0]}-{time.strftime('%Y%m%d-%H%M%S')}"

    def tracker_config(self, episodes: int, out_dir: Path) -> dict[str, Any]:
        """What trackers are told about the run."""
        return {"preset": self.preset, "policy": self.policy, "seed": self.seed, "episodes": episodes,
                "out": str(out_dir)}  # fmt: skip


def _preset(name: str) -> Preset:
    try:
        return get_preset(name)
    except AresError as exc:
        raise fail(str(exc)) from None
