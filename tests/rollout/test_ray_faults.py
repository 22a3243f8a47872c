"""Faults injected into a real Ray run (local Ray, real sandboxes, HumanEval): an actor killed with
``ray.kill`` while it plays, and the policy's HTTP server killed mid-episode and started again.
Every run still ends with one result and one record per episode, and each failure is blamed as
``ares.envs.blame`` says: a lost actor and an unreachable policy server are the infrastructure's
(masked, refilled where the run refills), and nothing else is touched.
"""

from __future__ import annotations

import asyncio
import functools
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import ares
import host_kills
from ares.agents.base import ActionFormat
from ares.core.status import EpisodeStatus
from ares.llm.types import LLMRequest, LLMResponse
from ares.policies import make_policy
from ares.policies.base import Policy
from ares.records.collectors import JsonDirCollector
from ares.records.loader import load_episodes
from ares.rollout.results import EpisodeResult, RunSummary
from ares.tasks.model import Task
from host_kills import FaultyFirst
from oracle_openai import oracle_script
from oracle_openai_process import ServerProcess

ray = pytest.importorskip("ray")
cloudpickle = pytest.importorskip("ray.cloudpickle")

from ares.rollout.ray import RayRunner  # noqa: E402

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray workers cannot import this module
cloudpickle.register_pickle_by_value(host_kills)

pytestmark = pytest.mark.usefixtures("ray_instance")  # tests/rollout/conftest.py

ORACLE = make_policy("oracle")


@pytest.fixture(scope="module")
def fleet(ray_instance: None) -> Iterator[RayRunner]:
    """Two actors over HumanEval (two steps: solve, submit); enough replacements for every kill."""
    make_env = functools.partial(ares.make, "humaneval", tasks="0:3", step_limit=2)
    runner = RayRunner(make_env, actors=2, actor_options={"num_cpus": 0}, max_actor_restarts=8)
    yield runner
    asyncio.run(runner.close())


async def until(condition: Callable[[], Any]) -> None:
    """Poll ``condition()`` (state another process writes) while the run goes on."""
    while True:
        if condition():
            return
        await asyncio.sleep(0.02)


def check_records(path: Path, results: list[EpisodeResult]) -> None:
    """One record per episode on disk, whose status and blame are the result's."""
    on_disk = {r.metadata["episode_index"]: r for r in load_episodes(path)}
    assert sorted(on_disk) == [r.index for r in results]
    for result in results:
        episode = on_disk[result.index].metadata["episode"]
        assert on_disk[result.index].status == str(result.status) == episode["status"]
        assert episode.get("blame") == result.blame and episode.get("masked", False) == result.masked


# ----------------------------------------------------------------------------- a killed actor


class _Stalls:
    """Tells the driver which actor it runs in (``marker``), then waits there until it is killed."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    async def act(self, observation: LLMRequest) -> LLMResponse:
        part = self.marker.with_suffix(".part")
        part.write_text(ray.get_runtime_context().get_actor_name())
        part.rename(self.marker)
        await asyncio.Event().wait()
        raise AssertionError("unreachable: the actor is killed first")


class StallOnce:
    """The oracle, except that the first episode of ``humaneval_1`` stalls (once per marker)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __call__(self, task: Task, fmt: ActionFormat) -> Policy:
        if task.id == "humaneval_1" and not self.marker.exists():
            return _Stalls(self.marker)
        return ORACLE(task, fmt)


async def killed_run(runner: RayRunner, path: Path, refills: int) -> list[EpisodeResult]:
    marker = path / "stalled"
    collector = JsonDirCollector(path / "records")
    seen: list[EpisodeResult] = []
    run = asyncio.create_task(
        runner.run(
            StallOnce(marker), episodes=4, concurrency=2, refills=refills, collector=collector,
            on_result=seen.append,
        )
    )  # fmt: skip
    await until(marker.exists)
    ray.kill(ray.get_actor(marker.read_text()), no_restart=True)  # episode 1's actor, mid-episode
    results = await run
    collector.close()
    assert [r.index for r in results] == [0, 1, 2, 3] and len(seen) == 4
    check_records(path / "records", results)
    assert RunSummary.of(results, 1.0).episodes == 4
    return results


async def test_an_actor_killed_mid_run_loses_only_its_episodes_and_refills_play_them_again(
    tmp_path: Path, fleet: RayRunner
) -> None:
    (tmp_path / "lost").mkdir()
    lost = await killed_run(fleet, tmp_path / "lost", refills=0)
    errored = [r for r in lost if r.errored]
    assert 1 in {r.index for r in errored}  # the episode it stalled, and any that shared the actor
    for r in errored:
        assert r.error is not None and r.error["type"] == "ActorDiedError" and "died" in r.error["message"]
        assert (r.blame, r.masked, r.refills) == ("infra", True, 0)
    assert all((r.status, r.reward) == (EpisodeStatus.FINISHED, 1.0) for r in lost if not r.errored)
    assert len(await fleet.stats()) == 2  # the survivor and a replacement

    (tmp_path / "refilled").mkdir()
    refilled = await killed_run(fleet, tmp_path / "refilled", refills=1)
    assert [(r.status, r.reward, r.blame) for r in refilled] == [(EpisodeStatus.FINISHED, 1.0, None)] * 4
    assert refilled[1].refills == 1  # played again, on an actor that was alive
    assert {r.refills for r in refilled} <= {0, 1}
    assert len(await fleet.stats()) == 2


# ----------------------------------------------------------------------------- a sandbox killed by the host


async def test_a_sandbox_the_host_kills_on_an_actor_is_masked_and_refilled(tmp_path: Path) -> None:
    """The actor's first sandbox has its pid 1 SIGKILLed by the host mid-episode (root here: the
    actor's cgroups tell that from the agent's doing); its episode is masked infra and played again."""
    make_env = functools.partial(ares.make, "humaneval", tasks="0:1", sandbox_factory=FaultyFirst(1))
    runner = RayRunner(make_env, actors=1, actor_options={"num_cpus": 0})
    collector = JsonDirCollector(tmp_path / "records")
    try:
        results = await runner.run(ORACLE, episodes=2, concurrency=1, refills=1, collector=collector)
    finally:
        collector.close()
        await runner.close()
    check_records(tmp_path / "records", results)
    assert [(r.status, r.reward, r.blame, r.refills) for r in results] == [
        (EpisodeStatus.FINISHED, 1.0, None, 1),
        (EpisodeStatus.FINISHED, 1.0, None, 0),
    ]
    everything = load_episodes(tmp_path / "records", keep_superseded=True)
    (killed,) = [e for e in everything if e.status == "errored"]
    assert killed.metadata["episode_index"] == 0 and killed.error is not None
    assert killed.error.type == "SandboxKilledError"
    assert (killed.metadata["episode"]["blame"], killed.metadata["episode"]["masked"]) == ("infra", True)


# ----------------------------------------------------------------------------- a killed policy server


async def test_a_policy_server_killed_mid_episode_fails_its_episodes_as_infra_and_a_restart_heals(
    tmp_path: Path, fleet: RayRunner
) -> None:
    """Episodes 0-1 play against the server; 2-3 get their first answer, then the server is killed
    while it holds their second request; 4-5 play against the server started again."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps(oracle_script("humaneval", "0:2")))
    server = ServerProcess(script, tmp_path / "hold")
    await server.start()
    policy = make_policy(
        "openai", base_url=f"http://127.0.0.1:{server.port}/v1", api_key="k", model="m", max_retries=1,
        backoff_s=0.01,
    )  # fmt: skip
    seen: list[EpisodeResult] = []
    phases = {0}
    lock = asyncio.Lock()

    async def kill_when_both_are_held() -> None:
        assert [await server.line(), await server.line()] == ["HELD", "HELD"]
        await server.kill()

    async def before_episode(index: int) -> None:
        phase = index // 2
        async with lock:
            await until(lambda: len(seen) >= 2 * phase)  # the earlier phases' episodes have ended
            if phase in phases:
                return
            phases.add(phase)
            if phase == 1:
                server.hold_file.touch()  # second requests wait unanswered, until the kill
                killer.append(asyncio.create_task(kill_when_both_are_held()))
            else:
                await killer[0]
                server.hold_file.unlink()
                await server.start()

    killer: list[asyncio.Task[None]] = []
    collector = JsonDirCollector(tmp_path / "records")
    try:
        results = await fleet.run(
            policy, episodes=6, concurrency=1, num_tasks=2, collector=collector, on_result=seen.append,
            before_episode=before_episode,
        )  # fmt: skip
    finally:
        collector.close()
        await server.kill()
    assert [r.index for r in results] == list(range(6))
    check_records(tmp_path / "records", results)
    healthy = [results[i] for i in (0, 1, 4, 5)]
    assert [(r.status, r.reward, r.blame) for r in healthy] == [(EpisodeStatus.FINISHED, 1.0, None)] * 4
    for r in (results[2], results[3]):
        # blame.py: "errored: the policy server could not be reached (any other LLMError)" -> infra
        assert (r.status, r.steps, r.blame, r.masked) == (EpisodeStatus.ERRORED, 1, "infra", True)
        assert (
            r.error is not None and r.error["type"] == "LLMError" and "could not reach" in r.error["message"]
        )
