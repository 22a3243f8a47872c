"""How hard each task is for a policy: its outcomes over ``repeats`` runs (``ares tasks validate
--policy SPEC``), the measurement a curriculum's pass rates can start from.

One ``run_episodes`` pass, one group of ``repeats`` rollouts per task. Each run's outcome is the
verifier's pass/fail (``EpisodeResult.passed``); a run a trainer would mask (the infrastructure
failed it, or the task could not be verified) is None: it says nothing about the policy. Each task is
handed to ``on_task`` as soon as its last run is in (one at a time, in the order they end), so a long
measurement is saved as it goes and a resumed one skips what it has.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ares.core.environment import Environment
from ares.policies.base import PolicyFactory
from ares.rollout.results import EpisodeResult
from ares.rollout.runner import run_episodes


async def measure_policy(
    make_env: Callable[[], Environment[Any, Any]],
    task_ids: Sequence[str],
    policy_factory: PolicyFactory,
    *,
    repeats: int,
    concurrency: int = 4,
    on_episode: Callable[[EpisodeResult], None] | None = None,
    on_task: Callable[[str, list[bool | None]], Awaitable[None]] | None = None,
) -> dict[str, list[bool | None]]:
    """Each task's outcomes under ``policy_factory``, ``repeats`` runs each, in run order."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    outcomes: dict[str, list[bool | None]] = {task_id: [None] * repeats for task_id in task_ids}
    left = dict.fromkeys(task_ids, repeats)
    done: asyncio.Queue[str | None] = asyncio.Queue()

    def on_result(result: EpisodeResult) -> None:
        task, repeat = divmod(result.index, repeats)
        task_id = task_ids[task]
        outcomes[task_id][repeat] = None if result.masked else result.passed
        left[task_id] -= 1
        if left[task_id] == 0:
            done.put_nowait(task_id)
        if on_episode is not None:
            on_episode(result)

    async def hand_over() -> None:
        while (task_id := await done.get()) is not None:
            if on_task is not None:
                await on_task(task_id, outcomes[task_id])

    handing = asyncio.create_task(hand_over())
    try:
        await run_episodes(
            make_env, policy_factory, episodes=len(task_ids) * repeats, group_size=repeats,
            concurrency=concurrency, num_tasks=len(task_ids), keep_records=False, on_result=on_result,
        )  # fmt: skip
    finally:
        done.put_nowait(None)
        await handing  # every finished task is handed over, also when the run fails or is cancelled
    return outcomes
