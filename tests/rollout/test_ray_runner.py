"""The Ray runner against the local one, on a real local Ray instance (2 CPUs), real sandboxes and
tasks: same episodes and records for the same seeds, failures as errored results, lost actors.

Starting actors is most of a test's time, so the tests that need nothing but actors over
``HUMANEVAL`` share one runner (``fleet``), as a trainer would across its steps; tests of starting,
stopping or losing actors, and of other environments, start their own.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import ares
from ares.agents.base import ActionFormat
from ares.core.status import EpisodeStatus
from ares.llm.types import LLMRequest, LLMResponse
from ares.policies import make_policy
from ares.policies.base import Policy
from ares.records.collectors import JsonDirCollector
from ares.records.loader import load_episodes
from ares.records.model import EpisodeRecord
from ares.rollout.results import EpisodeResult, RunSummary
from ares.rollout.runner import run_episodes
from ares.tasks.model import Task
from fake_openai import FakeOpenAI

ray = pytest.importorskip("ray")
cloudpickle = pytest.importorskip("ray.cloudpickle")

from ares.rollout.ray import PresetEnv, RayRunError, RayRunner, run_episodes_ray, shared_policy  # noqa: E402

# Ray workers cannot import this test module: ship its classes by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

FIXBUG = Path(__file__).parents[1] / "fixtures" / "harbor" / "fix-bug"
# Two steps: the oracle's (write, submit) fit, a policy that never submits is truncated after two.
HUMANEVAL = functools.partial(ares.make, "humaneval", tasks="0:3", step_limit=2)
ORACLE = make_policy("oracle")


pytestmark = pytest.mark.usefixtures("ray_instance")  # tests/rollout/conftest.py


@pytest.fixture(scope="module")
def fleet(ray_instance: None) -> Iterator[RayRunner]:
    """Actors over ``HUMANEVAL``, one per CPU of the instance (the default count), started by the
    first test that runs on them. They reserve no CPU, which leaves the instance's two to tests that
    start fleets of their own. No test kills them or depends on what ran on them before."""
    runner = RayRunner(HUMANEVAL, actor_options={"num_cpus": 0})
    yield runner
    asyncio.run(runner.close())


def comparable(record: EpisodeRecord) -> dict[str, Any]:
    """A record without what differs between any two runs (ids, clocks, durations, hosts)."""
    episode = dict(record.metadata["episode"])
    for key in ("id", "episode_id", "parent_episode_id", "started_at", "ended_at", "duration_s", "sandbox"):
        episode.pop(key, None)
    return {
        "task_id": record.task_id,
        "seed": record.seed,
        "status": record.status,
        "reward": record.total_reward,
        "index": record.metadata.get("episode_index"),
        "group": record.metadata.get("group_id"),
        "episode": {k: v for k, v in episode.items() if not k.endswith(("_s", "_at"))},
        "steps": [
            (s.index, s.step_type, s.observation, s.action, s.reward, s.discount) for s in record.steps
        ],
    }


Run = Callable[..., Awaitable[list[EpisodeResult]]]


async def both(tmp_path: Path, make_env: Any, remote: Run, **options: Any) -> tuple[list[EpisodeResult], ...]:
    """Run the same episodes locally on ``make_env`` and with ``remote`` (a Ray run over the same
    environments), recording into two directories."""
    runs = []
    for name, run in (("local", functools.partial(run_episodes, make_env)), ("ray", remote)):
        collector = JsonDirCollector(tmp_path / name)
        runs.append(await run(ORACLE, collector=collector, concurrency=2, **options))
        collector.close()
    return tuple(runs)


def records(path: Path) -> list[dict[str, Any]]:
    def order(r: dict[str, Any]) -> tuple[Any, ...]:  # a forked group's prefix has no episode number
        return (-1 if r["index"] is None else r["index"], str(r["group"]), r["status"], len(r["steps"]))

    return sorted((comparable(r) for r in load_episodes(path)), key=order)


async def test_same_episodes_and_records_as_the_local_runner_on_humaneval(
    tmp_path: Path, fleet: RayRunner
) -> None:
    local, remote = await both(tmp_path, HUMANEVAL, fleet.run, episodes=4, group_size=2, seed=7)
    assert [(r.index, r.task_id, r.status, r.reward, r.group, r.steps) for r in remote] == [
        (r.index, r.task_id, r.status, r.reward, r.group, r.steps) for r in local
    ]
    assert {r.status for r in remote} == {EpisodeStatus.FINISHED}
    assert records(tmp_path / "ray") == records(tmp_path / "local")
    assert len(records(tmp_path / "ray")) == 4  # written once each, by the driver


async def test_same_episodes_and_records_on_a_harbor_task(tmp_path: Path) -> None:
    make_env = functools.partial(ares.make, "harbor", path=str(FIXBUG))
    local, remote = await both(
        tmp_path, make_env, functools.partial(run_episodes_ray, make_env, actors=1), episodes=2
    )
    assert [(r.task_id, r.status, r.reward) for r in remote] == [
        (r.task_id, r.status, r.reward) for r in local
    ]
    assert [r.reward for r in remote] == [1.0, 1.0]
    assert records(tmp_path / "ray") == records(tmp_path / "local")


async def test_shared_prefix_groups_run_on_actors(tmp_path: Path, fleet: RayRunner) -> None:
    local, remote = await both(tmp_path, HUMANEVAL, fleet.run, episodes=4, group_size=2, branch_at=1)
    assert [(r.index, r.group, r.status, r.reward) for r in remote] == [
        (r.index, r.group, r.status, r.reward) for r in local
    ]
    assert records(tmp_path / "ray") == records(tmp_path / "local")


async def test_group_tasks_pick_the_same_tasks_on_actors(tmp_path: Path, fleet: RayRunner) -> None:
    """A curriculum's plan (``group_tasks``, drawn by the driver) plays the same groups on Ray, flat and
    with shared prefixes."""
    for branch_at in (None, 1):
        options = {"episodes": 4, "group_size": 2, "group_tasks": [2, 0], "branch_at": branch_at}
        local, remote = await both(tmp_path / str(branch_at), HUMANEVAL, fleet.run, **options)
        assert (
            [r.task_id for r in remote]
            == [r.task_id for r in local]
            == ["humaneval_2"] * 2 + ["humaneval_0"] * 2
        )


class Raising:
    async def act(self, observation: LLMRequest) -> LLMResponse:
        raise RuntimeError("the inference server fell over")


def raising_policy(task: Task, fmt: ActionFormat) -> Policy:
    return Raising()


async def test_a_failing_policy_is_an_errored_result_and_record_not_an_exception(
    tmp_path: Path, fleet: RayRunner
) -> None:
    collector = JsonDirCollector(tmp_path)
    results = await fleet.run(raising_policy, episodes=3, collector=collector)
    collector.close()
    assert [r.status for r in results] == [EpisodeStatus.ERRORED] * 3
    assert all(r.error and r.error["message"] == "the inference server fell over" for r in results)
    on_disk = load_episodes(tmp_path)
    assert sorted(r.status for r in on_disk) == ["errored"] * 3
    assert all(r.error is not None and r.error.type == "RuntimeError" for r in on_disk)


#: A wrong HumanEval/0, a planted reward with a process that keeps rewriting it, and a python3 that
#: only ever writes reward 1: all of it in the agent's own sandbox.
FORGERY = (
    "printf 'def has_close_elements(numbers, threshold):\\n    return False\\n' > solution.py",
    "mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt && (nohup sh -c 'while :; do "
    "echo 1 > /logs/verifier/reward.txt; sleep 0.01; done' >/dev/null 2>&1 &)",
    "printf '#!/bin/sh\\necho 1 > /logs/verifier/reward.txt\\n' > /tmp/p && chmod +x /tmp/p && "
    'cp /tmp/p "$(readlink -f "$(command -v python3)")"',
)


class Forger:
    """Plays ``FORGERY`` through the bash agent, then submits."""

    def __init__(self, task: Task, fmt: ActionFormat) -> None:
        self.fmt, self.moves = fmt, list(FORGERY)

    async def act(self, observation: LLMRequest) -> LLMResponse:
        return self.fmt.command(self.moves.pop(0)) if self.moves else self.fmt.submit()


async def test_pooled_sandboxes_on_actors_verify_in_a_fork_and_forgery_earns_nothing(tmp_path: Path) -> None:
    """Through Ray actors whose environments take sandboxes from a warm pool, every episode is
    verified in a fork (never in the agent's own sandbox), on every supported Python."""
    make_env = functools.partial(ares.make, "humaneval", tasks="0", warm_pool=1)
    collector = JsonDirCollector(tmp_path)
    async with RayRunner(make_env, actors=1) as runner:
        forged = await runner.run(Forger, episodes=2, collector=collector)
        honest = await runner.run(ORACLE, episodes=1, collector=collector)
    collector.close()
    assert [(r.status, r.reward) for r in forged] == [(EpisodeStatus.FINISHED, 0.0)] * 2
    assert [(r.status, r.reward) for r in honest] == [(EpisodeStatus.FINISHED, 1.0)]
    modes = [r.metadata["episode"]["verifier_mode"] for r in load_episodes(tmp_path)]
    assert modes == ["outputs"] * 3


class KillsItsActor:
    """Kills the process it runs in (a crashed Ray worker) on its first call for episode ``victim``,
    once per marker file: a retry on another actor then plays normally."""

    def __init__(self, inner: Policy, marker: Path) -> None:
        self.inner, self.marker = inner, marker

    async def act(self, observation: LLMRequest) -> LLMResponse:
        if not self.marker.exists():
            self.marker.write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
            await asyncio.sleep(60)
        return await self.inner.act(observation)


class Killer:
    def __init__(self, victim_task: str, marker: Path) -> None:
        self.victim_task, self.marker = victim_task, marker

    def __call__(self, task: Task, fmt: ActionFormat) -> Policy:
        inner = ORACLE(task, fmt)
        return KillsItsActor(inner, self.marker) if task.id == self.victim_task else inner


async def killed_run(runner: RayRunner, path: Path, retries: int) -> None:
    """A run on ``runner`` whose policy kills an actor once: it completes, one result and one
    record per episode; the lost episodes end errored, or (``retries``) are played again."""
    collector = JsonDirCollector(path / "records")
    seen: list[EpisodeResult] = []
    results = await runner.run(
        Killer("humaneval_1", path / "killed"), episodes=4, concurrency=2, collector=collector,
        retries=retries, on_result=seen.append,
    )  # fmt: skip
    collector.close()
    assert (path / "killed").exists()
    assert [r.index for r in results] == list(range(4)) and len(seen) == 4
    errored = [r for r in results if r.errored]
    if retries:
        assert errored == [] and all(r.reward == 1.0 for r in results)
    else:
        # the victim for sure; an episode that shared the actor at that moment may be lost too
        assert 1 in {r.index for r in errored}
        for r in errored:
            assert r.error is not None and r.error["type"] == "ActorDiedError"
            assert "died" in r.error["message"]
        assert all(r.reward == 1.0 for r in results if not r.errored)
    on_disk = load_episodes(path / "records")
    assert sorted(r.metadata["episode_index"] for r in on_disk) == list(range(4))  # once each
    by_index = {r.metadata["episode_index"]: r for r in on_disk}
    for r in results:
        assert by_index[r.index].status == str(r.status) == by_index[r.index].metadata["episode"]["status"]
    summary = RunSummary.of(results, wall_time_s=1.0)
    assert summary.errored == len(errored) and summary.episodes == 4


async def test_an_actor_killed_mid_run_fails_or_retries_its_episodes_and_the_run_completes(
    tmp_path: Path,
) -> None:
    # One fleet of its own for both cases. Without retries every unit is in flight when the actor
    # dies (4 slots, 4 episodes), so nothing is queued: the dead actor must still be replaced, or the
    # next run would send it work.
    async with RayRunner(HUMANEVAL, actors=2) as runner:
        await killed_run(runner, tmp_path / "no-retry", retries=0)
        assert len(await runner.stats()) == 2  # the survivor and a replacement
        await killed_run(runner, tmp_path / "retry", retries=1)
    assert await runner.stats() == []  # closed: no actor left


def broken_env() -> Any:
    raise FileNotFoundError("no such dataset: /nowhere")


async def test_an_environment_that_cannot_be_built_is_a_clear_error() -> None:
    with pytest.raises(RayRunError, match="no such dataset"):
        await run_episodes_ray(broken_env, ORACLE, episodes=2, actors=1, actor_start_timeout_s=60)


async def test_an_openai_compatible_endpoint_is_called_from_the_actors(fleet: RayRunner) -> None:
    server = FakeOpenAI()
    server.start()
    try:
        factory = make_policy("openai", base_url=server.base_url, api_key="k", model="m", backoff_s=0.01)
        results = await fleet.run(factory, episodes=2, concurrency=1)
    finally:
        server.stop()
    assert [r.status for r in results] == [EpisodeStatus.TRUNCATED] * 2
    assert [r.steps for r in results] == [2, 2]
    assert len(server.received) == 4
    assert {r.body["model"] for r in server.received} == {"m"}


async def test_bad_arguments_are_refused_before_anything_starts() -> None:
    runner = RayRunner(HUMANEVAL, actors=2)
    with pytest.raises(ValueError, match="group_size"):
        await runner.run(ORACLE, episodes=1, group_size=0)
    with pytest.raises(ValueError, match="retries"):
        await runner.run(ORACLE, episodes=1, retries=-1)
    with pytest.raises(ValueError, match="branch_at"):
        await runner.run(ORACLE, episodes=1, branch_at=-1)
    assert await runner.stats() == []  # no actor was started


def test_ares_run_joins_a_running_cluster_and_writes_one_record_per_episode(tmp_path: Path) -> None:
    address = ray.get_runtime_context().gcs_address
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "ares.cli.main", "run", "humaneval", "--tasks", "0:2", "-c", "2", "--ray",
         "--ray-address", address, "--ray-actors", "1", "--out", str(out)],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes"] == 2 and summary["mean_reward"] == 1.0
    assert len(list((out / "episodes").glob("*.json"))) == 2
    assert sorted(r.metadata["episode_index"] for r in load_episodes(out / "trajectories")) == [0, 1]


def test_ray_options_without_ray_are_a_usage_error() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ares.cli.main", "run", "humaneval", "--retries", "1"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and "go with --ray" in done.stderr + done.stdout


async def test_a_shared_policy_server_answers_every_actor_frees_its_sessions_and_traces(
    fleet: RayRunner,
) -> None:
    """A traced run links dispatch, episode, policy calls and result across processes. (The fleet's
    actors trace from here on; no other test reads their events.)"""
    from ares import tracing

    parts: list[list[dict[str, Any]]] = []
    tracing.configure("basic", process="test driver")
    try:
        policy = shared_policy(ORACLE)
        try:
            results = await fleet.run(policy, episodes=4, concurrency=1, on_trace_events=parts.append)
            assert [r.reward for r in results] == [1.0] * 4
            assert await policy.server.sessions.remote() == 0
        finally:
            await policy.shutdown()
        events = tracing.merge_traces([tracing.drain(), *parts])
    finally:
        tracing.shutdown()
    names = {
        e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"
    }
    assert len(names) == 4  # the driver, two actors, the policy server
    slices = [e for e in events if e.get("ph") == "X"]
    by_name: dict[str, set[int]] = {}
    for e in slices:
        by_name.setdefault(e["name"], set()).add(e["pid"])
    assert len(by_name["episode"]) == 2 and by_name["dispatch"] == by_name["result"] == by_name["run"]
    assert len(by_name["policy.serve"]) == 1 and by_name["policy.serve"].isdisjoint(by_name["episode"])
    starts = {e["id"]: e["pid"] for e in events if e.get("ph") == "s"}
    ends = {e["id"]: e["pid"] for e in events if e.get("ph") == "f"}
    assert starts.keys() == ends.keys()
    crossing = [flow for flow, pid in starts.items() if ends[flow] != pid]
    # per episode: dispatch -> episode, episode -> result, and one policy call per step -> the server
    assert len(crossing) == len(starts) >= 4 * 2 + 4 * 2


async def test_preset_env_runs_the_docker_backend_on_actors(tmp_path: Path) -> None:
    from engine_kit import docker_kit

    try:
        url = str(docker_kit().ensure_engine().base_url)
    except RuntimeError as exc:
        pytest.skip(f"no Docker API engine: {exc}")
    make_env = PresetEnv("harbor", "docker", {"path": str(FIXBUG)})
    results = await run_episodes_ray(
        make_env, ORACLE, episodes=2, actors=1, concurrency=2,
        actor_options={"num_cpus": 1, "runtime_env": {"env_vars": {"DOCKER_HOST": url}}},
    )  # fmt: skip
    assert [(r.status, r.reward) for r in results] == [(EpisodeStatus.FINISHED, 1.0)] * 2


# ----------------------------------------------------------------------------- hostile

RAY_PROBE = r"""
import json, socket, sys
out = {}
for addr in json.loads(sys.argv[1]):
    host, port = addr.rsplit(":", 1)
    s = socket.socket()
    s.settimeout(1.0)
    try:
        s.connect((host, int(port)))
        out[addr] = "connected"
    except OSError as e:
        out[addr] = type(e).__name__
    finally:
        s.close()
print("RAY-PROBE " + json.dumps(out))
"""


def probe_env(networks: tuple[bool, ...]) -> Any:
    """One probe task per ``network`` setting, so that one fleet plays them all."""
    from ares.envs.code_env import CodeEnvironment
    from ares.presets import BashAgentFactory
    from ares.sandbox.local import LocalSandbox

    tests = {"test.sh": "mkdir -p /logs/verifier && echo 0 > /logs/verifier/reward.txt\n"}
    tasks = [Task(id=f"probe-net-{n}", instruction="probe", tests=tests, network=n) for n in networks]
    return CodeEnvironment(tasks, agent_factory=BashAgentFactory(), sandbox_factory=LocalSandbox)


class RayProber:
    """An agent that, from its sandbox on a Ray worker node, dials every port Ray listens on."""

    def __init__(self, targets: list[str]) -> None:
        self.targets = targets

    def __call__(self, task: Task, fmt: ActionFormat) -> Policy:
        from ares.policies.scripted import ReplayPolicy

        command = f"python3 -c {shlex.quote(RAY_PROBE)} {shlex.quote(json.dumps(self.targets))}"
        return ReplayPolicy([fmt.command(command)], fmt.submit())


async def test_a_sandbox_on_an_actor_cannot_reach_the_ray_cluster(tmp_path: Path) -> None:
    networked = bool(shutil.which("pasta") or shutil.which("slirp4netns"))
    networks = (False, True) if networked else (False,)
    node = ray.nodes()[0]
    host = node["NodeManagerAddress"]
    targets = [ray.get_runtime_context().gcs_address] + [
        f"{host}:{node[key]}" for key in ("NodeManagerPort", "ObjectManagerPort") if node.get(key, -1) > 0
    ]
    collector = JsonDirCollector(tmp_path)
    make_env = functools.partial(probe_env, networks)
    results = await run_episodes_ray(
        make_env, RayProber(targets), episodes=len(networks), actors=1, collector=collector
    )
    collector.close()
    assert [r.task_id for r in results] == [f"probe-net-{n}" for n in networks]
    for result in results:
        assert result.status is EpisodeStatus.FINISHED, result.error
    on_disk = load_episodes(tmp_path)
    assert sorted(r.task_id for r in on_disk) == sorted(r.task_id for r in results)
    for record in on_disk:
        said = [m.content for step in record.steps if step.observation for m in step.observation.messages]
        line = next(x for text in said for x in str(text).splitlines() if x.startswith("RAY-PROBE "))
        found = json.loads(line.removeprefix("RAY-PROBE "))
        assert set(found) == set(targets)
        assert "connected" not in found.values(), (record.task_id, found)
    if not networked:
        pytest.skip("checked without network only: no pasta or slirp4netns for a networked sandbox")


async def test_a_runner_keeps_its_actors_across_runs_with_different_policies(fleet: RayRunner) -> None:
    await fleet.start()
    pids = sorted(s["pid"] for s in await fleet.stats())
    first = await fleet.run(ORACLE, episodes=3, concurrency=2)
    second = await fleet.run(make_policy("null"), episodes=3, concurrency=2)
    assert sorted(s["pid"] for s in await fleet.stats()) == pids and len(pids) == 2
    assert [r.reward for r in first] == [1.0] * 3
    assert [r.reward for r in second] == [0.0] * 3
