"""Groups streamed to the trainer as they finish: ``async for group in stream_groups(...)``.

An asynchronous trainer wants each group of k rollouts of a task the moment its last member ends,
not the whole run at the end; and it wants the runner to wait when it falls behind instead of
piling up finished groups. ``stream_groups`` runs ``run_episodes`` (or another runner with its
call, such as ``run_episodes_ray``) underneath and yields each complete group (its results in
episode order) ready-first, through a buffer of at most ``buffer`` finished groups: while the
buffer is full no new episode starts (the episodes already running finish). Leaving the loop early
cancels the episodes still running; an error in the run is raised from the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from ares.core.environment import Environment
from ares.policies.base import PolicyFactory
from ares.rollout.results import EpisodeResult
from ares.rollout.runner import run_episodes

_DONE = object()

#: A runner with ``run_episodes``' call: ``run_episodes`` itself, or ``run_episodes_ray`` (Ray).
Runner = Callable[..., Awaitable[list[EpisodeResult]]]


async def stream_groups(
    make_env: Callable[[], Environment[Any, Any]],
    policy_factory: PolicyFactory,
    *,
    episodes: int,
    group_size: int = 1,
    buffer: int = 4,
    runner: Runner = run_episodes,
    **run_options: Any,
) -> AsyncIterator[list[EpisodeResult]]:
    """Each complete group of ``runner(make_env, policy_factory, episodes=..., group_size=...,
    **run_options)`` as it finishes. ``on_result`` in ``run_options`` still sees every result."""
    if buffer < 1:
        raise ValueError(f"buffer must be >= 1, got {buffer}")
    if episodes % group_size:
        raise ValueError(f"{episodes} episodes are not a multiple of the group size {group_size}")
    ready: asyncio.Queue[Any] = asyncio.Queue()
    room = asyncio.Condition()
    members: dict[int, list[EpisodeResult]] = {}
    skipped = set(run_options.get("skip", ()))
    user_on_result = run_options.pop("on_result", None)

    def on_result(result: EpisodeResult) -> None:
        if user_on_result is not None:
            user_on_result(result)
        group = result.index // group_size
        done = members.setdefault(group, [])
        done.append(result)
        wanted = sum(1 for i in range(group * group_size, (group + 1) * group_size) if i not in skipped)
        if len(done) == wanted:
            ready.put_nowait(sorted(members.pop(group), key=lambda r: r.index))

    async def before_episode(index: int) -> None:
        async with room:
            await room.wait_for(lambda: ready.qsize() < buffer)

    async def run() -> None:
        try:
            await runner(
                make_env, policy_factory, episodes=episodes, group_size=group_size, on_result=on_result,
                before_episode=before_episode, **run_options,
            )  # fmt: skip
        finally:
            ready.put_nowait(_DONE)

    task = asyncio.create_task(run(), name="ares-stream-groups")
    try:
        while True:
            group = await ready.get()
            if group is _DONE:
                break
            async with room:
                room.notify_all()  # a slot in the buffer freed up
            yield group
        await task  # the run's own error, if it failed
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
