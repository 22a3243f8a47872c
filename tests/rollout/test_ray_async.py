"""The local runner's asynchronous-RL options on Ray actors (real local Ray, real sandboxes, HumanEval):
refills, the staleness bound, the gate and streamed groups behave as they do locally
(tests/rollout/test_{refills,staleness,pause,stream}.py).

One fleet of two actors serves every test. Its environments fail the start of one sandbox per
marker file a test leaves in ``markers`` (a real start failure, blamed ``infra``, counted across
both actors' processes). The trainer's version lives here, in the driver: the policy is an
OpenAI-compatible server in this process that stamps it on every answer, and that holds a turn's
requests unanswered when a test wants a policy call in flight.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import ares
from ares.core.environment import Environment
from ares.errors import PolicyError, SandboxUnavailableError
from ares.policies import make_policy
from ares.records.collectors import JsonDirCollector
from ares.records.loader import load_episodes
from ares.rollout import PolicyGate, RaySettings, RunSpec, Staleness, stream_groups
from ares.rollout.results import EpisodeResult
from ares.sandbox.base import SandboxSpec
from ares.sandbox.local import LocalSandbox
from oracle_openai import OracleOpenAI, oracle_script
from refill_checks import check_whole_refilled_groups

ray = pytest.importorskip("ray")
cloudpickle = pytest.importorskip("ray.cloudpickle")

from ares.rollout.ray import RayRunner  # noqa: E402

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray workers cannot import this module

pytestmark = pytest.mark.usefixtures("ray_instance")  # tests/rollout/conftest.py

ORACLE = make_policy("oracle")
TASKS = "0:3"


class _EngineDown(LocalSandbox):
    """A local sandbox that cannot start, as when a backend's engine stops answering."""

    async def start(self) -> None:
        raise SandboxUnavailableError("injected: the sandbox engine did not answer")


@dataclass(frozen=True)
class _MarkedFactory:
    """Real local sandboxes, but one fails to start per marker file it can take from ``markers``
    (taken by rename: one process gets each, whichever actor it runs in)."""

    markers: str

    def __call__(self, spec: SandboxSpec) -> LocalSandbox:
        for name in sorted(os.listdir(self.markers)):
            try:
                os.rename(os.path.join(self.markers, name), os.path.join(self.markers, f".{name}"))
            except FileNotFoundError:
                continue  # another actor took it
            if not name.startswith("."):
                return _EngineDown(spec)
        return LocalSandbox(spec)


@dataclass(frozen=True)
class _MarkedHumanEval:
    """HumanEval's bash agent, three steps (the server's solve, one filler command, submit)."""

    markers: str

    def __call__(self) -> Environment[Any, Any]:
        return ares.make("humaneval", tasks=TASKS, step_limit=3, sandbox_factory=_MarkedFactory(self.markers))


@pytest.fixture(scope="module")
def markers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("markers")


@pytest.fixture(scope="module")
def fleet(ray_instance: None, markers: Path) -> Iterator[RayRunner]:
    runner = RayRunner(_MarkedHumanEval(str(markers)), actors=2, actor_options={"num_cpus": 0})
    yield runner
    asyncio.run(runner.close())


def fail_next_sandboxes(markers: Path, count: int) -> None:
    for n in range(count):
        (markers / f"fail-{os.urandom(4).hex()}-{n}").touch()


# ----------------------------------------------------------------------------- refills


async def test_infra_failures_are_refilled_on_actors_and_groups_stay_whole(
    tmp_path: Path, fleet: RayRunner, markers: Path
) -> None:
    fail_next_sandboxes(markers, 2)
    collector = JsonDirCollector(tmp_path)
    results = await fleet.run(
        ORACLE, episodes=4, group_size=2, concurrency=1, refills=2, collector=collector, num_tasks=2
    )
    collector.close()
    check_whole_refilled_groups(results, tmp_path)
    assert sum(r.refills for r in results) == 2  # which episodes met the broken sandboxes: any
    everything = load_episodes(tmp_path, keep_superseded=True)
    assert sorted(e.status for e in everything) == ["errored"] * 2 + ["finished"] * 4
    assert not list(markers.glob("fail-*"))


async def test_refills_are_bounded_and_the_last_failure_is_kept_masked(
    fleet: RayRunner, markers: Path
) -> None:
    fail_next_sandboxes(markers, 2)
    (result,) = await fleet.run(ORACLE, episodes=1, concurrency=1, refills=1)
    assert (result.status.value, result.blame, result.masked, result.refills) == ("errored", "infra", True, 1)
    assert result.error is not None and result.error["type"] == "SandboxUnavailableError"


class _Refuses:
    async def act(self, observation: object) -> object:
        raise PolicyError("the model refused to answer")


def refusing(task: Any, action_format: Any) -> Any:
    return _Refuses()


async def test_a_policy_failure_is_never_refilled_on_actors(fleet: RayRunner) -> None:
    results = await fleet.run(refusing, episodes=2, concurrency=1, refills=3)
    assert [(r.status.value, r.blame, r.masked, r.refills) for r in results] == [
        ("errored", "policy", False, 0)
    ] * 2


# ----------------------------------------------------------------------------- versions and the gate


class Trainer:
    """The driver's version counter and the policy server that stamps it on each answer; turns from
    ``hold_from`` wait while ``holding`` (a policy call kept in flight)."""

    def __init__(self, hold_from: int | None = None) -> None:
        self.version = 0
        self.holding = hold_from is not None
        self.server = OracleOpenAI(
            oracle_script("humaneval", TASKS, fillers=1),
            version=lambda: self.version,
            hold=lambda turn: self.holding and hold_from is not None and turn >= hold_from,
        )
        self.server.start()
        self.policy = make_policy("openai", base_url=self.server.base_url, api_key="k", model="m")

    def staleness(self, max_staleness: int) -> Staleness:
        return Staleness(lambda: self.version, max_staleness)

    def close(self) -> None:
        self.holding = False
        self.server.stop()


@pytest.fixture
def make_trainer() -> Iterator[Callable[..., Trainer]]:
    made: list[Trainer] = []

    def make(hold_from: int | None = None) -> Trainer:
        made.append(Trainer(hold_from))
        return made[-1]

    yield make
    for trainer in made:
        trainer.close()


async def until(condition: Callable[[], Any]) -> None:
    """Poll ``condition()`` (state of the server's threads) while the run goes on; the test's own
    timeout bounds the wait."""
    while True:
        if condition():
            return
        await asyncio.sleep(0.02)


async def until_actors(fleet: RayRunner, condition: Callable[[dict[str, Any]], bool]) -> None:
    """Wait until every actor's state of the run in progress satisfies ``condition``."""
    while True:
        runs = [run for s in await fleet.stats() for run in s["runs"].values()]
        if runs and all(condition(run) for run in runs):
            return
        await asyncio.sleep(0.02)


def versions_by_episode(path: Path) -> dict[int, list[Any]]:
    """Each recorded episode's answer versions, in step order."""
    return {
        e.metadata["episode_index"]: [s.action.policy_version for s in e.steps if s.action is not None]
        for e in load_episodes(path)
    }


async def test_the_gate_holds_every_actor_until_no_call_is_in_flight_and_episodes_go_on(
    tmp_path: Path, fleet: RayRunner, make_trainer: Callable[..., Trainer]
) -> None:
    t = make_trainer(hold_from=1)
    gate = PolicyGate()
    collector = JsonDirCollector(tmp_path)
    run = asyncio.create_task(fleet.run(t.policy, episodes=2, concurrency=1, gate=gate, collector=collector))
    await until(lambda: t.server.held == 2)  # both episodes, one per actor, are in a policy call
    pause = asyncio.create_task(gate.pause())
    await until_actors(fleet, lambda run: run["paused"])
    assert not pause.done() and t.server.in_flight == 2  # paused everywhere, the calls still under way
    t.holding = False
    await pause
    assert t.server.in_flight == 0 and t.server.answered == 4  # no call in flight on any actor
    for _ in range(50):  # the episodes have reached their next step boundary and wait there
        await asyncio.sleep(0.02)
    assert t.server.answered == 4 and t.server.in_flight == 0 and not run.done()
    t.version = 1  # the weight update: every answer from here on is version 1
    gate.resume()
    results = await run
    collector.close()
    assert [(r.status.value, r.reward, r.refills) for r in results] == [("finished", 1.0, 0)] * 2
    # the calls under way completed with the old weights, the next ones came from the new
    assert versions_by_episode(tmp_path) == {0: [0, 0, 1], 1: [0, 0, 1]}


async def test_a_preempting_pause_on_the_driver_preempts_the_calls_on_every_actor(
    tmp_path: Path, fleet: RayRunner, make_trainer: Callable[..., Trainer]
) -> None:
    """``pause(preempt=True)`` returns while the server still holds both calls (cancelled on the
    actors, not waited for); after the update each is re-issued and answered by the new version."""
    t = make_trainer(hold_from=1)
    gate = PolicyGate()
    collector = JsonDirCollector(tmp_path)
    run = asyncio.create_task(fleet.run(t.policy, episodes=2, concurrency=1, gate=gate, collector=collector))
    await until(lambda: t.server.held == 2)  # both episodes, one per actor, are in a policy call
    await gate.pause(preempt=True)  # returns with the server still holding them
    assert t.server.held == 2 and not run.done()
    t.version = 1
    t.holding = False
    gate.resume()
    results = await run
    collector.close()
    assert [(r.status.value, r.reward) for r in results] == [("finished", 1.0)] * 2
    assert versions_by_episode(tmp_path) == {0: [0, 1, 1], 1: [0, 1, 1]}  # the held turn re-issued


async def test_a_version_pushed_at_resume_ends_a_stale_episode_and_the_refill_uses_new_weights(
    tmp_path: Path, fleet: RayRunner, make_trainer: Callable[..., Trainer]
) -> None:
    t = make_trainer(hold_from=1)
    gate = PolicyGate()
    collector = JsonDirCollector(tmp_path)
    run = asyncio.create_task(
        fleet.run(
            t.policy, episodes=1, concurrency=1, gate=gate, staleness=t.staleness(2), refills=1,
            collector=collector,
        )
    )  # fmt: skip
    await until(lambda: t.server.held == 1)
    pause = asyncio.create_task(gate.pause())
    await until_actors(fleet, lambda run: run["paused"])
    t.holding = False
    await pause
    t.version = 3  # three updates while paused: the episode's oldest token is now 3 behind
    gate.resume()
    (result,) = await run
    collector.close()
    assert (result.status.value, result.reward, result.refills, result.masked) == ("finished", 1.0, 1, False)
    (stale,) = [e for e in load_episodes(tmp_path, keep_superseded=True) if e.status == "errored"]
    assert stale.error is not None and stale.error.type == "StaleEpisodeError"
    assert "version 0, 3 behind the current 3 (max_staleness 2)" in stale.error.message
    assert versions_by_episode(tmp_path) == {0: [3, 3, 3]}  # played again with the current weights


async def test_a_version_change_without_a_gate_reaches_the_actors(
    fleet: RayRunner, make_trainer: Callable[..., Trainer]
) -> None:
    t = make_trainer(hold_from=1)
    run = asyncio.create_task(fleet.run(t.policy, episodes=1, concurrency=1, staleness=t.staleness(2)))
    await until(lambda: t.server.held == 1)
    t.version = 3
    await until_actors(fleet, lambda run: run["version"] == 3)  # polled here, pushed to every actor
    t.holding = False
    (result,) = await run
    assert (result.status.value, result.blame, result.masked) == ("errored", "infra", True)
    assert result.error is not None and result.error["type"] == "StaleEpisodeError"


async def test_a_version_source_that_raises_fails_the_episode_on_ray_as_it_does_locally(
    fleet: RayRunner, make_trainer: Callable[..., Trainer]
) -> None:
    """The trainer's ``current()`` raises mid-episode: on Ray the driver pushes what it raised and
    the episode fails with it at its next step, blamed and masked as a local run's is."""
    t = make_trainer(hold_from=1)
    broken = False

    def current() -> int:
        if broken:
            raise ValueError("the trainer lost its step counter")
        return t.version

    run = asyncio.create_task(fleet.run(t.policy, episodes=1, concurrency=1, staleness=Staleness(current, 2)))
    await until(lambda: t.server.held == 1)
    broken = True
    await until_actors(fleet, lambda run: run["version_error"] is not None)
    t.holding = False
    (on_ray,) = await run
    (local,) = await RunSpec.load("humaneval", tasks="0", staleness=Staleness(current, 2)).play(t.policy)
    for result, error in ((on_ray, "VersionSourceError"), (local, "ValueError")):
        assert (result.status.value, result.blame, result.masked) == ("errored", "infra", True)
        assert result.error is not None and result.error["type"] == error
        assert "the trainer lost its step counter" in result.error["message"]


async def test_within_the_bound_an_episode_on_an_actor_is_untouched(
    fleet: RayRunner, make_trainer: Callable[..., Trainer]
) -> None:
    t = make_trainer()
    t.version = 2  # answers are version 2 and the trainer is at 2: nothing is stale
    (result,) = await fleet.run(t.policy, episodes=1, concurrency=1, staleness=t.staleness(0))
    assert (result.status.value, result.reward, result.blame) == ("finished", 1.0, None)


# ----------------------------------------------------------------------------- streamed groups


def stream_on(fleet: RayRunner, **options: Any) -> AsyncIterator[list[EpisodeResult]]:
    """``stream_groups`` of the oracle on a fleet that is already up (its environments are the fleet's)."""

    async def run(make_env: Any, policy_factory: Any, **run_options: Any) -> list[EpisodeResult]:
        return await fleet.run(policy_factory, **run_options)

    return stream_groups(fleet_env, ORACLE, runner=run, **options)


def fleet_env() -> Environment[Any, Any]:
    raise AssertionError("the fleet's actors build their own environments")


async def test_every_group_arrives_whole_and_once_from_the_actors(fleet: RayRunner) -> None:
    groups = [group async for group in stream_on(fleet, episodes=6, group_size=2, buffer=2, concurrency=2)]
    assert sorted(g[0].group for g in groups) == [0, 1, 2]
    for group in groups:
        assert [r.index for r in group] == [2 * group[0].group, 2 * group[0].group + 1]
        assert len({r.task_id for r in group}) == 1 and all(r.reward == 1.0 for r in group)


async def test_a_full_buffer_holds_back_new_episodes_on_every_actor(fleet: RayRunner) -> None:
    """Two actors, one episode each at a time: while the consumer holds the first group and the
    buffer is full, at most the episodes already running finish (one per actor)."""
    started: list[int] = []
    stream = stream_on(
        fleet, episodes=6, buffer=1, concurrency=1, on_result=lambda r: started.append(r.index)
    )
    first = await anext(stream)
    assert len(first) == 1
    for _ in range(100):  # let the runner go as far as it may (it blocks on the full buffer)
        await asyncio.sleep(0.02)
    held = len(started)
    rest = [group async for group in stream]
    assert held <= 3  # the group read, one in the buffer, one that was already running
    assert 1 + len(rest) == 6


async def test_leaving_early_stops_the_run_on_the_actors(fleet: RayRunner) -> None:
    seen: list[int] = []
    stream = stream_on(fleet, episodes=8, buffer=1, concurrency=1, on_result=lambda r: seen.append(r.index))
    async for _ in stream:
        break
    await stream.aclose()  # type: ignore[attr-defined]
    assert len(seen) <= 3
    after = await fleet.run(ORACLE, episodes=2, concurrency=1)  # the fleet goes on with the next run
    assert [r.reward for r in after] == [1.0, 1.0]


def test_a_run_spec_streams_its_groups_from_ray_actors() -> None:
    spec = RunSpec.load(
        "humaneval", tasks="0:2", group_size=2, concurrency=2, refills=1, ray=RaySettings(actors=1)
    )

    async def consume() -> list[list[EpisodeResult]]:
        return [group async for group in spec.stream(ORACLE, buffer=1)]

    groups = asyncio.run(consume())
    assert sorted(g[0].group for g in groups) == [0, 1]
    assert all(r.reward == 1.0 and r.refills == 0 for g in groups for r in g)
