"""Refills: an episode the infrastructure failed is played again (same index, task and seed) so its
group stays whole; a policy's own failure never is. The failure is injected for real: sandboxes
whose start fails as an unreachable engine's would, then real local sandboxes."""

from __future__ import annotations

import asyncio
import os
import select
import signal
from pathlib import Path
from typing import Any

from ares.errors import PolicyError, SandboxUnavailableError
from ares.policies import make_policy
from ares.records.collectors import JsonDirCollector
from ares.records.exports.turns import episode_fact
from ares.records.loader import load_episodes
from ares.rollout import PolicyGate, RaySettings, RunSpec, Staleness
from ares.sandbox.base import SandboxSpec
from ares.sandbox.local import LocalSandbox
from refill_checks import check_whole_refilled_groups


class _EngineDown(LocalSandbox):
    """A local sandbox that cannot start, as when a backend's engine stops answering."""

    async def start(self) -> None:
        raise SandboxUnavailableError("injected: the sandbox engine did not answer")


class _FlakyFactory:
    """The first ``failures`` sandboxes it makes cannot start; every later one is a real sandbox."""

    def __init__(self, failures: int) -> None:
        self.failures, self.made = failures, 0

    def __call__(self, spec: SandboxSpec) -> LocalSandbox:
        self.made += 1
        return _EngineDown(spec) if self.made <= self.failures else LocalSandbox(spec)


def test_infra_failures_are_refilled_and_groups_stay_whole(tmp_path: Path) -> None:
    spec = RunSpec.load("humaneval", tasks="0:2", group_size=2, concurrency=1, refills=2)
    collector = JsonDirCollector(tmp_path)
    results = asyncio.run(
        spec.play(make_policy("oracle"), sandbox_factory=_FlakyFactory(2), collector=collector)
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


class _KilledByHost(LocalSandbox):
    """A real local sandbox whose pid 1 the host SIGKILLs (as an operator or the host's OOM killer
    would) once the agent has its answer, just before the answer is written."""

    async def upload(self, src: Any, dest: str) -> None:
        pidfd = os.pidfd_open(self._pids[0])
        try:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            await asyncio.to_thread(select.select, [pidfd], [], [], 30.0)  # readable once it is dead
        finally:
            os.close(pidfd)
        await super().upload(src, dest)


class _KillsFirst:
    """The first ``kills`` sandboxes it makes are killed by the host mid-episode; later ones live."""

    def __init__(self, kills: int) -> None:
        self.kills, self.made = kills, 0

    def __call__(self, spec: SandboxSpec) -> LocalSandbox:
        self.made += 1
        return _KilledByHost(spec) if self.made <= self.kills else LocalSandbox(spec)


def test_sandboxes_the_host_kills_mid_episode_are_masked_and_refilled(tmp_path: Path) -> None:
    """Root here: cgroups count memory and processes, so a kill from outside is told from the
    agent's own doing (tests/envs/test_blame.py has the unprivileged side)."""
    spec = RunSpec.load("humaneval", tasks="0:2", group_size=2, concurrency=1, refills=2)
    collector = JsonDirCollector(tmp_path)
    played = spec.play(make_policy("oracle"), sandbox_factory=_KillsFirst(2), collector=collector)
    results = asyncio.run(played)
    collector.close()
    check_whole_refilled_groups(results, tmp_path)
    failed = [e for e in load_episodes(tmp_path, keep_superseded=True) if e.status == "errored"]
    assert len(failed) == 2
    for episode in failed:
        facts = (episode_fact(episode, "blame"), episode_fact(episode, "masked"), episode.error)
        assert facts[:2] == ("infra", True) and facts[2] is not None and facts[2].type == "SandboxKilledError"


def test_refills_are_bounded_and_the_last_failure_is_kept_masked() -> None:
    spec = RunSpec.load("humaneval", tasks="0", concurrency=1, refills=1)
    (result,) = asyncio.run(spec.play(make_policy("oracle"), sandbox_factory=_FlakyFactory(5)))
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
