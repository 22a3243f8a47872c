"""Play a task set's audit through the rollout runner: every applicable exploit on every task, and
each task's mutants, as ordinary episodes of the bash agent on the tasks' own sandboxes and verifiers.

The runs are laid out as one task list (a copy of each task per run, marked with its run number), so
one ``run_episodes`` pass plays them all with ``concurrency`` at once, whatever mixes of tasks and
attacks that makes. A task is judged as soon as its last run is in and handed to ``on_task``.
"""

from __future__ import annotations

import asyncio
import base64
import math
import shlex
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

from ares.agents.base import ActionFormat
from ares.agents.bash import BashAgentFactory
from ares.audit.exploits import Exploit
from ares.audit.strength import Mutant, MutantPlan, plan_mutants
from ares.audit.target import kind_of, target_of
from ares.audit.verdict import AttackOutcome, Strength, TaskAudit, judge
from ares.envs.code_env import CodeEnvironment
from ares.llm.types import LLMRequest, LLMResponse
from ares.policies.base import Policy
from ares.policies.scripted import ReplayPolicy, oracle_command
from ares.rollout.results import EpisodeResult
from ares.rollout.runner import run_episodes
from ares.sandbox.base import SandboxFactory
from ares.tasks.model import Task

#: The metadata key that tells the audit's policy which run a task copy is.
RUN_KEY = "ares_audit_run"


@dataclass(frozen=True, slots=True)
class AuditOptions:
    """What to run: the exploits, the mutants per task (0: none), their radius and the weak threshold."""

    exploits: Sequence[Exploit]
    mutants: int = 20
    radius: int = 8
    weak_threshold: float = 0.5
    concurrency: int = 4
    step_limit: int = 10


@dataclass(frozen=True, slots=True)
class _Run:
    task: int
    label: str
    commands: tuple[str, ...]
    mutant: Mutant | None = None


def _write_file(workdir: str, mutant: Mutant) -> str:
    path = shlex.quote(f"{workdir.rstrip('/')}/{mutant.path}")
    encoded = base64.b64encode(mutant.text.encode()).decode()
    return f"base64 -d > {path} <<'ARES_B64'\n{encoded}\nARES_B64"


def _runs(tasks: Sequence[Task], exploits: Sequence[Exploit], plans: Sequence[MutantPlan]) -> list[_Run]:
    runs: list[_Run] = []
    for index, task in enumerate(tasks):
        target = target_of(task)
        for exploit in exploits:
            script = exploit.script(target)
            if script is not None:
                runs.append(_Run(index, exploit.name, (script,) if script else ()))
        for number, mutant in enumerate(plans[index].mutants):
            commands = (oracle_command(task),) if mutant.after_gold else ()
            runs.append(
                _Run(index, f"mutant {number}", (*commands, _write_file(task.workdir, mutant)), mutant)
            )
    return runs


def _accepted(result: EpisodeResult) -> bool:
    """Whether the tests accept a mutant: the FAIL_TO_PASS tests all pass (SWE terms), else reward 1."""
    terms = result.record.get("episode", result.record).get("reward_terms") or {}
    if "f2p_failed" in terms and "f2p_passed" in terms:
        return terms["f2p_failed"] == 0 and terms["f2p_passed"] > 0
    return result.reward is not None and math.isclose(result.reward, 1.0)


#: Characters of an exploit's own output kept (did it take?).
OUTPUT_CHARS = 300


class _Replay:
    """Runs a run's commands, then submits; keeps what the last command printed (the next observation)."""

    def __init__(self, commands: Sequence[LLMResponse], fmt: ActionFormat, sink: dict[int, str], run: int):
        self._policy = ReplayPolicy(commands, fmt.submit())
        self._asked, self._commands, self._sink, self._run = 0, len(commands), sink, run

    async def act(self, observation: LLMRequest) -> LLMResponse:
        if self._asked == self._commands and self._commands and observation.messages:
            content = observation.messages[-1].content
            text = content if isinstance(content, str) else ""
            self._sink[self._run] = text.strip()[-OUTPUT_CHARS:]
        self._asked += 1
        return await self._policy.act(observation)


class _Tally:
    """The outcomes of each task's runs so far; a task's audit once all are in."""

    def __init__(
        self, tasks: Sequence[Task], runs: Sequence[_Run], plans: Sequence[MutantPlan], options: AuditOptions
    ):
        self.tasks, self.plans, self.options = tasks, plans, options
        self.left = [0] * len(tasks)
        for run in runs:
            self.left[run.task] += 1
        self.attacks: dict[int, list[AttackOutcome]] = {i: [] for i in range(len(tasks))}
        self.mutants: dict[int, list[tuple[str, str]]] = {i: [] for i in range(len(tasks))}

    def add(self, run: _Run, result: EpisodeResult, output: str = "") -> TaskAudit | None:
        if run.mutant is None:
            self.attacks[run.task].append(AttackOutcome.of(run.label, result, output))
        else:
            state = (
                "errored"
                if str(result.status) == "errored"
                else "accepted"
                if _accepted(result)
                else "rejected"
            )
            self.mutants[run.task].append((state, run.mutant.description))
        self.left[run.task] -= 1
        return self.audit(run.task) if self.left[run.task] == 0 else None

    def audit(self, index: int) -> TaskAudit:
        task, plan = self.tasks[index], self.plans[index]
        order = {e.name: i for i, e in enumerate(self.options.exploits)}
        attacks = sorted(self.attacks[index], key=lambda a: order.get(a.attack, len(order)))
        strength = None
        if self.options.mutants:
            states = self.mutants[index]
            survivors = tuple(d for s, d in states if s == "accepted")
            strength = Strength(
                len(states), len(survivors), sum(s == "errored" for s, _ in states), plan.note, survivors
            )
        return judge(task.id, kind_of(task), attacks, strength, weak_threshold=self.options.weak_threshold)


@dataclass(frozen=True, slots=True)
class AuditPlan:
    """Every run of an audit, laid out: the tasks, their mutants, and one task copy per run."""

    tasks: tuple[Task, ...]
    plans: tuple[MutantPlan, ...]
    runs: tuple[_Run, ...]
    options: AuditOptions

    @property
    def episodes(self) -> int:
        return len(self.runs)

    def copies(self) -> list[Task]:
        return [
            replace(self.tasks[run.task], metadata={**self.tasks[run.task].metadata, RUN_KEY: i})
            for i, run in enumerate(self.runs)
        ]


async def plan_audit(
    tasks: Sequence[Task],
    sandbox_factory: SandboxFactory,
    options: AuditOptions,
    *,
    skip: set[str] | frozenset[str] = frozenset(),
) -> AuditPlan:
    """The runs that audit ``tasks`` (except the ids in ``skip``): the exploits that apply to each,
    then its mutants (planned ``concurrency`` tasks at a time: a SWE task's need a sandbox)."""
    todo = tuple(task for task in tasks if task.id not in skip)
    limit = asyncio.Semaphore(max(1, options.concurrency))

    async def plan(task: Task) -> MutantPlan:
        if not options.mutants:
            return MutantPlan()
        async with limit:
            try:
                return await plan_mutants(task, sandbox_factory, radius=options.radius, limit=options.mutants)
            except Exception as exc:  # a task whose source cannot be read still gets its exploits run
                return MutantPlan(note=f"no mutants: {type(exc).__name__}: {exc}"[:300])

    plans = tuple(await asyncio.gather(*(plan(task) for task in todo)))
    return AuditPlan(todo, plans, tuple(_runs(todo, options.exploits, plans)), options)


async def audit_tasks(
    plan: AuditPlan,
    sandbox_factory: SandboxFactory,
    *,
    on_episode: Callable[[EpisodeResult, str], None] | None = None,
    on_task: Callable[[TaskAudit], Awaitable[None]] | None = None,
) -> list[TaskAudit]:
    """Play ``plan``'s runs; the audits in the order the tasks were judged. ``on_episode`` sees each
    run as it ends (labelled "attack" or "mutant"), ``on_task`` each audit, awaited one at a time."""
    if not plan.runs:
        return []
    runs, options = plan.runs, plan.options
    copies = plan.copies()
    tally = _Tally(plan.tasks, runs, plan.plans, options)
    judged: asyncio.Queue[TaskAudit | None] = asyncio.Queue()
    audits: list[TaskAudit] = []

    outputs: dict[int, str] = {}

    def policy(task: Task, fmt: ActionFormat) -> Policy:
        index = int(task.metadata[RUN_KEY])
        return _Replay([fmt.command(c) for c in runs[index].commands], fmt, outputs, index)

    def on_result(result: EpisodeResult) -> None:
        run = runs[result.index]
        if on_episode is not None:
            on_episode(result, "mutant" if run.mutant is not None else "attack")
        audit = tally.add(run, result, outputs.pop(result.index, ""))
        if audit is not None:
            judged.put_nowait(audit)

    def make_env() -> CodeEnvironment:
        return CodeEnvironment(
            copies, agent_factory=BashAgentFactory(), sandbox_factory=sandbox_factory,
            step_limit=options.step_limit, name="audit",
        )  # fmt: skip

    async def play() -> None:
        try:
            await run_episodes(
                make_env, policy, episodes=len(runs), concurrency=options.concurrency,
                num_tasks=len(runs), keep_records=False, on_result=on_result,
            )  # fmt: skip
        finally:
            judged.put_nowait(None)

    async def hand_over() -> None:
        while (audit := await judged.get()) is not None:
            audits.append(audit)
            if on_task is not None:
                await on_task(audit)

    async with asyncio.TaskGroup() as group:
        group.create_task(play())
        group.create_task(hand_over())
    return audits
