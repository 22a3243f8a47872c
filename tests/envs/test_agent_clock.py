"""AgentClock: the policy's thinking time is off the "agent" clock and on the "wall" clock; a limit
that runs out while the policy thinks is acted on at its answer; snapshots carry the time used."""

from __future__ import annotations

import asyncio

import pytest

from ares.envs.agent_clock import AgentClock

LIMIT_S = 0.15


def clock(kind: str) -> tuple[AgentClock, list[float]]:
    fired: list[float] = []
    return AgentClock(kind, lambda: fired.append(asyncio.get_running_loop().time())), fired  # type: ignore[arg-type]


def test_an_unknown_clock_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="'agent' or 'wall'"):
        AgentClock("cpu", lambda: None)  # type: ignore[arg-type]


async def test_the_agent_alone_running_out_its_time_expires_the_clock() -> None:
    agent_clock, fired = clock("agent")
    agent_clock.start(LIMIT_S)
    await asyncio.sleep(LIMIT_S * 2)
    assert len(fired) == 1


async def test_policy_time_is_off_the_agent_clock() -> None:
    agent_clock, fired = clock("agent")
    agent_clock.start(LIMIT_S)
    agent_clock.to_policy()
    await asyncio.sleep(LIMIT_S * 1.5)  # the policy thinks past the whole limit
    thought = agent_clock.from_policy()
    assert thought is not None and thought >= LIMIT_S
    assert fired == []  # pushed back by the policy's time, not expired
    await asyncio.sleep(LIMIT_S * 1.5)  # now the agent works past it
    assert len(fired) == 1


async def test_policy_time_is_on_the_wall_clock() -> None:
    wall_clock, fired = clock("wall")
    wall_clock.start(LIMIT_S)
    wall_clock.to_policy()
    await asyncio.sleep(LIMIT_S * 1.5)
    assert len(fired) == 1  # mid-thought: the wall clock does not wait for the answer


async def test_a_limit_reached_while_the_policy_thinks_is_acted_on_at_its_answer() -> None:
    agent_clock, fired = clock("agent")
    agent_clock.start(LIMIT_S, used_s=LIMIT_S)  # a restored episode with nothing left
    agent_clock.to_policy()
    await asyncio.sleep(0.05)
    assert fired == []
    agent_clock.from_policy()
    assert len(fired) == 1


async def test_the_time_used_excludes_policy_time_and_counts_what_a_snapshot_had_used() -> None:
    agent_clock, _ = clock("agent")
    agent_clock.start(60.0, used_s=5.0)
    await asyncio.sleep(0.05)  # the agent works
    agent_clock.to_policy()
    used = agent_clock.agent_time_s
    assert 5.04 <= used < 5.5
    await asyncio.sleep(0.05)  # the policy thinks: not counted
    assert agent_clock.agent_time_s == used
    agent_clock.stop()


async def test_no_observation_pending_means_no_agent_time_and_no_thinking_time() -> None:
    agent_clock, _ = clock("agent")
    agent_clock.start(60.0)
    assert agent_clock.from_policy() is None
    with pytest.raises(RuntimeError, match="no observation pending"):
        _ = agent_clock.agent_time_s
    agent_clock.stop()


async def test_a_stopped_clock_never_fires() -> None:
    agent_clock, fired = clock("wall")
    agent_clock.start(0.02)
    agent_clock.stop()
    await asyncio.sleep(0.08)
    assert fired == []


async def test_starting_again_disarms_the_previous_episode_s_timer() -> None:
    agent_clock, fired = clock("wall")
    agent_clock.start(0.03)
    agent_clock.start(60.0)
    await asyncio.sleep(0.1)
    assert fired == []
    agent_clock.stop()
