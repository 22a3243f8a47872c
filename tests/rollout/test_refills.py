"""Refills: an episode the infrastructure failed is played again (same index, task and seed) so its
group stays whole; a policy's own failure never is. The failure is injected for real: sandboxes
whose start fails as an unreachable engine's would, then real local sandboxes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from ares.errors import PolicyError, SandboxUnavailableError
from ares.policies import make_policy
from ares.records.collectors import JsonDirCollector
from ares.records.exports.turns import episode_fact
from ares.records.loader import load_episodes
from ares.rollout import PolicyGate, RaySettings, RunSpec, Staleness
from ares.sandbox.base import SandboxSpec
from ares.sandbox.local import LocalSandbox
from host_kills import FaultyFirst
from oracle_openai import oracle_script
from oracle_openai_process import ServerProcess
from refill_checks import check_whole_refilled_groups


class _EngineDown(LocalSandbox):
    """A local sandbox that cannot start, as when a backend's engine stops answering."""

    async def start(self) -> None:
        raise SandboxUnavailableError("injected: the sandbox engine did not answer")


def test_infra_failures_are_refilled_and_groups_stay_whole(tmp_path: Path) -> None:
    spec = RunSpec.load("humaneval", tasks="0:2", group_size=2, concurrency=1, refills=2)
    collector = JsonDirCollector(tmp_path)
    results = asyncio.run(
        spec.play(make_policy("oracle"), sandbox_factory=FaultyFirst(2, _EngineDown), collector=collector)
    )
    collector.close()
    check_whole_refilled_groups(results, tmp_path)
    assert [r.refills for r in results] == [2, 0, 0, 0]  # episode 0 met both broken sandboxes
    everything = load_episodes(tmp_path, keep_superseded=True)
    assert sorted(e.status for e in everything if e.metadata["episode_index"] == 0) == [
        "errored",
        "errored",
        "finished",
    ]


def test_sandboxes_the_host_kills_mid_episode_are_masked_and_refilled(tmp_path: Path) -> None:
    """Root here: cgroups count memory and processes, so a kill from outside is told from the
    agent's own doing (tests/envs/test_blame.py has the unprivileged side)."""
    spec = RunSpec.load("humaneval", tasks="0:2", group_size=2, concurrency=1, refills=2)
    collector = JsonDirCollector(tmp_path)
    played = spec.play(make_policy("oracle"), sandbox_factory=FaultyFirst(2), collector=collector)
    results = asyncio.run(played)
    collector.close()
    check_whole_refilled_groups(results, tmp_path)
    failed = [e for e in load_episodes(tmp_path, keep_superseded=True) if e.status == "errored"]
    assert len(failed) == 2
    for episode in failed:
        assert len(episode.steps) == 2  # the first observation, and the command it was killed under
        facts = (episode_fact(episode, "blame"), episode_fact(episode, "masked"), episode.error)
        assert facts[:2] == ("infra", True) and facts[2] is not None and facts[2].type == "SandboxKilledError"


class _StartsOnceServed(LocalSandbox):
    """A real local sandbox that starts only once ``served`` is set (the policy server is back)."""

    def __init__(self, spec: SandboxSpec, served: asyncio.Event) -> None:
        super().__init__(spec)
        self.served = served

    async def start(self) -> None:
        await self.served.wait()
        await super().start()


async def test_a_policy_server_killed_mid_episode_is_masked_and_refilled_once_back(tmp_path: Path) -> None:
    """Episodes 0-1 get their first answer, then the server (a real subprocess) is SIGKILLed while
    it holds their second request; it is started again, and only then may a sandbox start for the
    refilled attempts and for episodes 2-3."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps(oracle_script("humaneval", "0:2")))
    server = ServerProcess(script, tmp_path / "hold")
    server.hold_file.touch()  # second requests wait unanswered, until the kill
    await server.start()
    served, made = asyncio.Event(), []

    def sandboxes(spec: SandboxSpec) -> LocalSandbox:
        made.append(spec)
        return LocalSandbox(spec) if len(made) <= 2 else _StartsOnceServed(spec, served)

    async def kill_and_restart() -> None:
        assert [await server.line(), await server.line()] == ["HELD", "HELD"]
        await server.kill()
        server.hold_file.unlink()
        await server.start()
        served.set()

    policy = make_policy(
        "openai", base_url=f"http://127.0.0.1:{server.port}/v1", api_key="k", model="m", max_retries=1,
        backoff_s=0.01,
    )  # fmt: skip
    spec = RunSpec.load("humaneval", tasks="0:2", group_size=2, concurrency=2, refills=1)
    collector = JsonDirCollector(tmp_path / "records")
    restart = asyncio.create_task(kill_and_restart())
    try:
        results = await spec.play(policy, sandbox_factory=sandboxes, collector=collector)
        await restart
    finally:
        collector.close()
        await server.kill()
    check_whole_refilled_groups(results, tmp_path / "records")
    assert [r.refills for r in results] == [1, 1, 0, 0] and len(made) == 6
    failed = [e for e in load_episodes(tmp_path / "records", keep_superseded=True) if e.status == "errored"]
    assert sorted(e.metadata["episode_index"] for e in failed) == [0, 1]
    for episode in failed:
        assert (episode_fact(episode, "blame"), episode_fact(episode, "masked")) == ("infra", True)
        assert episode.error is not None and episode.error.type == "LLMError"
        assert "could not reach" in episode.error.message


def test_refills_are_bounded_and_the_last_failure_is_kept_masked() -> None:
    spec = RunSpec.load("humaneval", tasks="0", concurrency=1, refills=1)
    (result,) = asyncio.run(spec.play(make_policy("oracle"), sandbox_factory=FaultyFirst(5, _EngineDown)))
    assert (result.status.value, result.blame, result.masked, result.refills) == ("errored", "infra", True, 1)


class _Refuses:
    """A policy that cannot answer: its own failure, which a trainer learns from as a zero."""

    async def act(self, observation: object) -> object:
        raise PolicyError("the model refused to answer")


def test_a_policy_failure_is_never_refilled() -> None:
    spec = RunSpec.load("humaneval", tasks="0", concurrency=1, refills=3)
    (result,) = asyncio.run(spec.play(lambda task, action_format: _Refuses()))  # type: ignore[arg-type,return-value]
    assert (result.status.value, result.blame, result.masked, result.refills) == (
        "errored",
        "policy",
        False,
        0,
    )


def test_refills_staleness_and_a_gate_go_to_ray_too() -> None:
    """No runner refuses them: the Ray runner refills, bounds staleness and pauses as this one does
    (tests/rollout/test_ray_async.py)."""
    spec = RunSpec.load(
        "humaneval", tasks="0", refills=1, staleness=Staleness(lambda: 0, 1), gate=PolicyGate(),
        ray=RaySettings(),
    )  # fmt: skip
    assert (spec.refills, spec.ray) == (1, RaySettings())
