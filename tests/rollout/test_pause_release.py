"""Sandboxes freed during a long pause: ``pause(release_after_s=...)`` has each held episode's
environment snapshot and stop its sandbox; on resume it is restored and the episode goes on from the
same step with the same observation, to the right reward. A run cancelled during a released pause
leaves no sandbox, no snapshot layer and no process. Real HumanEval episodes in local sandboxes, as
root and as nobody (uid 65534); an environment that cannot release keeps its sandbox and says so."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ares.policies import make_policy
from ares.rollout import RunSpec
from ares.rollout.pause import PolicyGate
from ares.sandbox.local import LocalSandbox
from nobody_python import run_as_nobody

SRC = Path(__file__).resolve().parents[2] / "src"

SCENARIO = r"""
import asyncio, json, os

from ares.agents.bash import BashActionFormat
from ares.policies import make_policy
from ares.records.collectors import MemoryCollector
from ares.records.exports.turns import turns
from ares.rollout import RunSpec
from ares.rollout.pause import PolicyGate
from ares.sandbox.local import workspace

FMT = BashActionFormat()
MARK = "sleep " + "4343"  # a background process the agent leaves running (not spelled out here)


def held_files():
    # Everything this process's local sandboxes keep: its dirs, sandbox dirs and snapshot layers.
    root = workspace.process_dir()
    return sorted(str(p.relative_to(root)) for d in (root, root / "sandboxes", root / "snapshots")
                  if d.is_dir() for p in d.iterdir() if p.name not in ("sandboxes", "snapshots"))


def marked():
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if MARK.encode() in f.read().replace(b"\0", b" "):
                    found.append(pid)
        except OSError:
            pass
    return found


async def until(condition):
    while not condition():
        await asyncio.sleep(0.05)


def factory_for(gate, state):
    def factory(task, action_format):
        oracle = make_policy("oracle")(task, action_format)

        class Policy:
            first = True

            async def act(self, observation):
                state["seen"].append(observation)
                if not self.first:
                    return await oracle.act(observation)
                self.first = False  # both episodes' first answers are in flight when the pause starts
                state["arrived"] += 1
                if state["arrived"] == 2:
                    state["both"].set()
                await state["both"].wait()
                if not gate.paused:
                    asyncio.get_running_loop().create_task(gate.pause(release_after_s=0))
                    await asyncio.sleep(0)
                return FMT.command(f"nohup {MARK} >/dev/null 2>&1 & echo started > /workspace/started")

        return Policy()
    return factory


async def released_and_restored(spec_of):
    before = held_files()
    gate = PolicyGate()
    state = {"seen": [], "arrived": 0, "both": asyncio.Event()}
    collector = MemoryCollector()
    run = asyncio.create_task(spec_of(gate).play(factory_for(gate, state), collector=collector))
    await asyncio.wait_for(until(lambda: len(gate.releases) == 2 and gate.held == 2), 300)
    during = {"files": held_files(), "processes": marked(), "released": [r.released for r in gate.releases],
              "steps": [r.step for r in gate.releases]}
    asked = len(state["seen"])
    gate.resume()
    results = await run
    episodes = collector.take()
    same = []
    for episode in episodes:
        recorded = episode.steps[1].observation  # what the step before the release returned
        same.append(sum(1 for seen in state["seen"][asked:] if seen == recorded) == 1)
    return {
        "before": before, "during": during, "after": held_files(), "processes_after": marked(),
        "results": [[str(r.status), r.reward] for r in results], "same_observation": same,
        "records": [r.record["metadata"].get("sandbox_releases") for r in results],
        "answers": [len(list(turns(e))) for e in episodes],
    }


async def cancelled_while_released(spec_of):
    before = held_files()
    gate = PolicyGate()
    await gate.pause(release_after_s=0)  # every episode is released as soon as it reaches the gate
    state = {"seen": [], "arrived": 0, "both": asyncio.Event()}
    run = asyncio.create_task(spec_of(gate).play(factory_for(gate, state)))
    await asyncio.wait_for(until(lambda: len(gate.releases) == 2 and gate.held == 2), 300)
    during = held_files()
    run.cancel()
    try:
        await run
    except asyncio.CancelledError:
        pass
    return {"before": before, "during": during, "after": held_files(), "processes_after": marked(),
            "released": [r.released for r in gate.releases]}


async def main():
    tasks = RunSpec.load("humaneval", tasks="0:2").tasks

    def spec_of(gate):
        return RunSpec(preset="humaneval", tasks=tasks, concurrency=2, gate=gate)

    print(json.dumps({"restored": await released_and_restored(spec_of),
                      "cancelled": await cancelled_while_released(spec_of)}))


asyncio.run(main())
"""


@pytest.fixture(scope="module", params=["root", "nobody"])
def outcome(request: pytest.FixtureRequest) -> dict[str, Any]:
    if request.param == "root":
        done = subprocess.run(
            [sys.executable, "-c", SCENARIO], capture_output=True, text=True, timeout=600,
            env={"PATH": "/usr/bin:/bin", "ARES_IMAGE_FALLBACK": "offline", "PYTHONPATH": str(SRC)},
        )  # fmt: skip
    else:
        done = run_as_nobody(request, "ares-release-", SCENARIO, [SRC], timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def kinds(files: list[str]) -> dict[str, int]:
    """How many sandbox dirs and snapshot layers a listing of the process's sandbox state holds."""
    return {kind: sum(name.startswith(f"{kind}/") for name in files) for kind in ("sandboxes", "snapshots")}


def test_a_released_episode_comes_back_at_its_step_and_finishes(outcome: dict[str, Any]) -> None:
    run = outcome["restored"]
    during = run["during"]
    assert during["released"] == [True, True] and during["steps"] == [1, 1]  # after the first step
    assert kinds(during["files"])["sandboxes"] == 0 and kinds(during["files"])["snapshots"] >= 2
    assert during["processes"] == []  # the sandboxes were stopped, their processes with them
    assert run["results"] == [["finished", 1.0], ["finished", 1.0]]  # from the same step, to the reward
    assert run["same_observation"] == [True, True]  # the restored agent asked exactly what it had
    assert run["answers"] == [3, 3]  # each step answered once
    assert run["records"] == [[{"step": 1, "released": True}]] * 2
    assert kinds(run["after"]) == {"sandboxes": 0, "snapshots": 0} and run["processes_after"] == []


def test_a_run_cancelled_while_released_leaves_nothing(outcome: dict[str, Any]) -> None:
    run = outcome["cancelled"]
    assert run["released"] == [True, True]
    assert kinds(run["during"])["sandboxes"] == 0 and kinds(run["during"])["snapshots"] >= 2
    assert run["after"] == run["before"] and run["processes_after"] == []  # the snapshots went too


def test_an_environment_that_cannot_release_keeps_its_sandbox_and_says_so() -> None:
    """A sandbox factory that cannot restore snapshots (a plain function): releasing would lose the
    episode, so it keeps its sandbox; the gate and the episode record say why, and it finishes."""

    async def main() -> tuple[list[Any], PolicyGate]:
        gate = PolicyGate()
        await gate.pause(release_after_s=0)
        spec = RunSpec.load("humaneval", tasks="0:1", gate=gate)
        plain = lambda sandbox_spec: LocalSandbox(sandbox_spec)  # noqa: E731 (declares no capability)
        run = asyncio.create_task(spec.play(make_policy("oracle"), sandbox_factory=plain))
        while not gate.releases:  # noqa: ASYNC110 (the release is recorded, not signalled)
            await asyncio.sleep(0.05)
        gate.resume()
        return await run, gate

    (result,), gate = asyncio.run(main())
    (kept,) = gate.releases
    assert not kept.released and kept.reason is not None and "cannot restore snapshots" in kept.reason
    assert result.status.value == "finished" and result.reward == 1.0
    (noted,) = result.record["metadata"]["sandbox_releases"]
    assert noted == {"step": 0, "released": False, "reason": kept.reason}


async def test_a_code_environment_releases_and_reacquires_between_two_steps() -> None:
    """The seam itself: released, the episode keeps its step and observation but no sandbox, and
    refuses to step; reacquired, its files are back and it goes on to the reward."""
    from ares.agents.bash import BashActionFormat
    from ares.core.releasing import ReleasingEnvironment
    from ares.errors import EnvironmentStateError, SnapshotError
    from ares.presets import make

    fmt = BashActionFormat()
    env = make("humaneval", tasks="0:1")
    assert isinstance(env, ReleasingEnvironment)
    async with env:
        ts = await env.reset(task=0)
        oracle = make_policy("oracle")(env.task, env.action_format)  # type: ignore[arg-type]
        ts = await env.step(fmt.command("echo kept > /workspace/kept.txt"))
        pending, steps = env.observation, env.episode.steps  # type: ignore[union-attr]
        await env.release()
        assert env.sandbox is None and env.observation is pending and env.episode.steps == steps  # type: ignore[union-attr]
        with pytest.raises(EnvironmentStateError, match="released"):
            await env.step(fmt.submit())
        with pytest.raises(SnapshotError, match="released"):
            await env.snapshot()
        await env.reacquire()
        assert env.sandbox is not None and env.observation == pending
        ts = await env.step(fmt.command("cat /workspace/kept.txt"))
        assert "kept" in ts.observation.messages[-1].text
        while not ts.last():
            ts = await env.step(await oracle.act(ts.observation))
        assert ts.reward == 1.0 and env.episode.status.value == "finished"  # type: ignore[union-attr]
