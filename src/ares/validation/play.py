"""Play the validation runs of many tasks with the rollout runner and judge each task when its runs are in.

Two ``run_episodes`` passes over the same environments: the null policy once per task, then the
oracle ``repeats`` times per task (one group of ``repeats`` rollouts per task, so a task's repeats
run side by side). A task is judged as soon as its last run is in, and handed to ``on_task`` one at a
time (e.g. to write the report), so an interrupted validation keeps every task it finished.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Any, TypeVar

from ares.core.environment import Environment
from ares.policies import null_policy, oracle_policy
from ares.rollout.results import EpisodeResult
from ares.rollout.runner import run_episodes
from ares.validation.verdict import Policy, RunOutcome, TaskValidation, judge

#: Statuses of a run that did not play to its end on its own (an interrupt): its task is not judged.
_CUT = frozenset({"cancelled", "aborted", "abandoned"})
V = TypeVar("V")


async def validate_tasks(
    make_env: Callable[[], Environment[Any, Any]],
    task_ids: Sequence[str],
    *,
    repeats: int = 2,
    concurrency: int = 4,
    skip: Collection[str] = (),
    on_episode: Callable[[EpisodeResult, Policy], None] | None = None,
    on_task: Callable[[TaskValidation], Awaitable[None]] | None = None,
) -> list[TaskValidation]:
    """Validate the tasks of ``make_env()``'s environments (``task_ids``: their ids, in their order),
    except those in ``skip``; the verdicts in the order the tasks were judged.

    ``on_episode`` sees each run as it ends, with its policy ("oracle" or "null": a progress display
    counts them apart); ``on_task`` each verdict, awaited one at a time.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    todo = [i for i, task_id in enumerate(task_ids) if task_id not in skip]
    pending = _Pending(task_ids, repeats)

    async def play(judged: Callable[[TaskValidation], None]) -> None:
        def collect(policy: Policy) -> Callable[[EpisodeResult], None]:
            def on_result(result: EpisodeResult) -> None:
                if on_episode is not None:
                    on_episode(result, policy)
                task, repeat = divmod(result.index, repeats) if policy == "oracle" else (result.index, 0)
                verdict = pending.add(task, policy, repeat, RunOutcome.of(policy, result))
                if verdict is not None:
                    judged(verdict)

            return on_result

        if todo:
            await _play_passes(make_env, len(task_ids), todo, repeats, concurrency, collect)

    return await _in_turn(play, on_task)


async def _play_passes(
    make_env: Callable[[], Environment[Any, Any]],
    count: int,
    todo: Sequence[int],
    repeats: int,
    concurrency: int,
    collect: Callable[[Policy], Callable[[EpisodeResult], None]],
) -> None:
    """The two passes over the ``count`` tasks: the null policy once per task in ``todo``, then the
    oracle ``repeats`` times per task (one group per task); ``collect(policy)`` receives the runs."""
    common: dict[str, Any] = {"concurrency": concurrency, "num_tasks": count, "keep_records": False}
    await run_episodes(
        make_env, null_policy, episodes=count, skip=set(range(count)) - set(todo),
        on_result=collect("null"), **common,
    )  # fmt: skip
    oracle_runs = {i * repeats + r for i in todo for r in range(repeats)}
    await run_episodes(
        make_env, oracle_policy, episodes=count * repeats, group_size=repeats,
        skip=set(range(count * repeats)) - oracle_runs, on_result=collect("oracle"), **common,
    )  # fmt: skip


async def _in_turn(
    play: Callable[[Callable[[V], None]], Awaitable[None]], on_task: Callable[[V], Awaitable[None]] | None
) -> list[V]:
    """Run ``play``, which reports each verdict as it is made, while handing the verdicts to ``on_task``
    one at a time (the runs never wait for it); every verdict, in the order it was made."""
    judged: asyncio.Queue[V | None] = asyncio.Queue()
    verdicts: list[V] = []

    async def produce() -> None:
        try:
            await play(judged.put_nowait)
        finally:
            judged.put_nowait(None)

    async def hand_over() -> None:
        while (verdict := await judged.get()) is not None:
            verdicts.append(verdict)
            if on_task is not None:
                await on_task(verdict)

    async with asyncio.TaskGroup() as group:
        group.create_task(produce())
        group.create_task(hand_over())
    return verdicts


class _Pending:
    """The runs of each task so far; a task's verdict once its null run and every repeat are in."""

    def __init__(self, task_ids: Sequence[str], repeats: int) -> None:
        self.task_ids, self.repeats = task_ids, repeats
        self.oracle: dict[int, list[RunOutcome | None]] = {}
        self.null: dict[int, RunOutcome] = {}
        self.cut: set[int] = set()

    def add(self, task: int, policy: Policy, repeat: int, outcome: RunOutcome) -> TaskValidation | None:
        if outcome.status in _CUT:
            self.cut.add(task)
        if policy == "null":
            self.null[task] = outcome
        else:
            self.oracle.setdefault(task, [None] * self.repeats)[repeat] = outcome
        runs = self.oracle.get(task, [None])
        null = self.null.get(task)
        if task in self.cut or null is None or any(run is None for run in runs):
            return None
        return judge(self.task_ids[task], [run for run in runs if run is not None], null)
