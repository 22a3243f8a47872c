"""Groups streamed as they finish: every group whole and once, ready-first, with backpressure (no
new episode starts while the buffer is full), and leaving early stops the run."""

from __future__ import annotations

import asyncio

from ares.policies import make_policy
from ares.rollout import RunSpec
from ares.rollout.results import EpisodeResult


def test_every_group_arrives_whole_and_once() -> None:
    spec = RunSpec.load("humaneval", tasks="0:3", group_size=2, concurrency=3)

    async def consume() -> list[list[EpisodeResult]]:
        return [group async for group in spec.stream(make_policy("oracle"), buffer=2)]

    groups = asyncio.run(consume())
    assert sorted(g[0].group for g in groups) == [0, 1, 2]
    for group in groups:
        assert [r.index for r in group] == [2 * group[0].group, 2 * group[0].group + 1]
        assert len({r.task_id for r in group}) == 1 and all(r.reward == 1.0 for r in group)


def test_a_full_buffer_holds_back_new_episodes() -> None:
    """The consumer takes one group, then stops reading: the runner may finish what it had started
    and fill the buffer, but starts nothing more until the consumer reads again."""
    spec = RunSpec.load("humaneval", tasks="0:8", concurrency=1)
    started: list[int] = []

    async def consume() -> tuple[int, int]:
        stream = spec.stream(make_policy("oracle"), buffer=1, on_result=lambda r: started.append(r.index))
        first = await anext(stream)
        assert len(first) == 1
        for _ in range(200):  # let the runner go as far as it may (it blocks on the full buffer)
            await asyncio.sleep(0.01)
        held = len(started)
        rest = [group async for group in stream]
        return held, 1 + len(rest)

    held, total = asyncio.run(consume())
    assert held <= 3  # the group read, one in the buffer, one that was already running
    assert total == 8


def test_leaving_early_stops_the_run() -> None:
    spec = RunSpec.load("humaneval", tasks="0:8", concurrency=1)
    seen: list[int] = []

    async def consume() -> None:
        async for _ in spec.stream(make_policy("oracle"), buffer=1, on_result=lambda r: seen.append(r.index)):
            break

    asyncio.run(consume())
    assert len(seen) <= 3
