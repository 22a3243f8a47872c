"""Environment snapshots: save mid-episode, restore here or in a new process, fork; real sandboxes."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import ares
from ares.envs.code_env import CodeEnvironment
from ares.errors import SnapshotError
from ares.llm.types import LLMRequest, user
from ares.records.collecting import TrajectoryCollectingEnvironment
from ares.records.collectors import JsonDirCollector
from ares.records.loader import load_episodes
from ares.sandbox.local import workspace
from ares.snapshot import EnvironmentSnapshot, restore
from bash_steps import FMT, play

HASHES = "find /workspace -type f -print0 | sort -z | xargs -0 sha256sum"
BEFORE = ["echo one > /workspace/a.txt", "mkdir -p /workspace/d && echo two > /workspace/d/b.txt"]
AFTER = [
    "rm /workspace/a.txt && echo three >> /workspace/d/b.txt",
    "cp /solution/solve.sh /tmp/ 2>/dev/null; ls -la /workspace | wc -l",
    HASHES,
]


async def test_restored_in_a_new_process_replays_identically(tmp_path: Path) -> None:
    env = ares.make("humaneval", tasks="0:1")
    async with env:
        await env.reset(task=0, seed=7)
        await play(env, BEFORE)
        snapshot = await env.snapshot()
        assert snapshot.step == 2 and snapshot.observation == env.observation
        await snapshot.save(tmp_path / "snap")
        original = await play(env, AFTER)
        final = await env.step(FMT.submit())
        assert final.last()
    script = textwrap.dedent(f"""
        import asyncio, json, sys
        from ares.agents.bash import BashActionFormat
        from ares.snapshot import EnvironmentSnapshot, restore
        FMT = BashActionFormat()
        async def main():
            snapshot = EnvironmentSnapshot.load(sys.argv[1])
            env = await restore(snapshot)
            async with env:
                seen = []
                for command in {AFTER!r}:
                    ts = await env.step(FMT.command(command))
                    seen.append(ts.observation.messages[-1].text)
                final = await env.step(FMT.submit())
                episode = env.episode
                print(json.dumps({{"seen": seen, "reward": final.reward,
                                  "parent": episode.parent_episode_id, "branch": episode.branch_step}}))
        asyncio.run(main())
    """)
    out = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-c", script, str(tmp_path / "snap")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    replay = json.loads(out.stdout.strip().splitlines()[-1])
    assert replay["seen"] == original  # identical observations, including the final file hashes
    assert "/workspace/d/b.txt" in original[-1] and "a.txt" not in original[-1]
    assert replay["reward"] == final.reward
    assert (replay["parent"], replay["branch"]) == (snapshot.episode_id, 2)


def snapshot_dirs() -> set[str]:
    where = workspace.process_dir() / "snapshots"
    return {p.name for p in where.iterdir()} if where.is_dir() else set()


def sandbox_dirs() -> set[str]:
    """This process's sandbox dirs (other tests' may still be there: compare, do not expect none)."""
    return {p.name for p in (workspace.process_dir() / "sandboxes").iterdir()}


async def test_fork_branches_are_independent_and_recorded_as_a_tree(tmp_path: Path) -> None:
    layers_before, sandboxes_before = snapshot_dirs(), sandbox_dirs()
    env = TrajectoryCollectingEnvironment(ares.make("humaneval", tasks="0:1"), JsonDirCollector(tmp_path))
    async with env:
        await env.reset(task=0)
        await play(env, ["echo shared > /workspace/shared.txt"])
        branches = await env.fork(4)
        try:
            for i, branch in enumerate(branches):
                await play(branch, [f"echo {i} > /workspace/mine-{i}.txt"])
            listings = [await play(b, ["ls /workspace | sort | tr '\\n' ' '"]) for b in branches]
            for i, (listing,) in enumerate(listings):
                assert f"mine-{i}.txt" in listing and "shared.txt" in listing
                assert all(f"mine-{j}.txt" not in listing for j in range(4) if j != i)
            rewards = []
            for branch in branches:
                ts = await branch.step(FMT.submit())
                assert ts.last()
                rewards.append(ts.reward)
            assert rewards == [0.0] * 4  # the stub is still wrong in every branch
            original = await play(env, ["ls /workspace | sort | tr '\\n' ' '"])
            assert "mine-" not in original[0]  # the parent never sees a branch's files
        finally:
            for branch in branches:
                await branch.close()
    records = load_episodes(tmp_path)
    parent = next(r for r in records if "parent_episode_id" not in r.metadata)
    children = [r for r in records if r.metadata.get("parent_episode_id") == parent.episode_id]
    assert len(children) == 4 and {c.metadata["branch_step"] for c in children} == {1}
    assert all(c.status == "finished" for c in children)
    assert sandbox_dirs() <= sandboxes_before  # nothing left behind
    assert snapshot_dirs() <= layers_before  # the fork's layers went with the last sandbox on them


async def test_snapshot_errors_are_clear(tmp_path: Path) -> None:
    env = ares.make("humaneval", tasks="0:1")
    async with env:
        with pytest.raises(SnapshotError, match="no episode was started"):
            await env.snapshot()
        await env.reset(task=0)
        snapshot = await env.snapshot()
        await snapshot.save(tmp_path / "ok")
        with pytest.raises(SnapshotError, match="not empty"):
            await snapshot.save(tmp_path / "ok")
        ts = await env.step(FMT.submit())
        assert ts.last()
        with pytest.raises(SnapshotError, match="has ended"):
            await env.snapshot()
        other = dataclasses.replace(snapshot, observation=LLMRequest(messages=(user("something else"),)))
        with pytest.raises(SnapshotError, match="different request"):
            await env.restore(other)
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "snapshot.json").write_text(json.dumps({"format": "ares.env-snapshot/0"}))
    with pytest.raises(SnapshotError, match="this ARES reads"):
        EnvironmentSnapshot.load(tmp_path / "old")
    with pytest.raises(SnapshotError, match="holds no snapshot"):
        EnvironmentSnapshot.load(tmp_path / "nowhere")
    (tmp_path / "ok" / "fs").rename(tmp_path / "ok" / "gone")
    with pytest.raises(SnapshotError, match="missing its filesystem"):
        EnvironmentSnapshot.load(tmp_path / "ok")


async def test_a_snapshot_waits_for_the_step_in_progress() -> None:
    env = ares.make("humaneval", tasks="0:1")
    async with env:
        await env.reset(task=0)
        stepping = asyncio.create_task(env.step(FMT.command("sleep 0.3; echo done > /workspace/x")))
        await asyncio.sleep(0.05)
        snapshot = await env.snapshot()  # waits for the command to finish
        assert stepping.done() and snapshot.step == 1
        restored = await restore(snapshot)
        async with restored:
            (seen,) = await play(restored, ["cat /workspace/x"])
            assert "done" in seen


async def test_restore_into_a_given_environment() -> None:
    source = ares.make("humaneval", tasks="0:2")
    async with source:
        await source.reset(task=1)
        await play(source, ["echo kept > /workspace/k"])
        snapshot = await source.snapshot()
    target = ares.make("humaneval", tasks="0:2", step_limit=50)
    assert isinstance(target, CodeEnvironment)
    async with target:
        await target.reset(task=0)  # an active episode is abandoned by the restore
        ts = await target.restore(snapshot)
        assert ts.mid() and target.task is not None and target.task.id == snapshot.task_id
        (seen,) = await play(target, ["cat /workspace/k"])
        assert "kept" in seen and target.step_limit == 50


async def test_runner_groups_share_a_prefix(tmp_path: Path) -> None:
    from ares.policies import make_policy
    from ares.rollout.runner import run_episodes

    results = await run_episodes(
        lambda: ares.make("humaneval", tasks="0:2"), make_policy("oracle"), episodes=4, group_size=2,
        branch_at=1, collector=JsonDirCollector(tmp_path),
    )  # fmt: skip
    assert [(r.index, r.group, r.reward, str(r.status)) for r in results] == [
        (0, 0, 1.0, "finished"), (1, 0, 1.0, "finished"), (2, 1, 1.0, "finished"), (3, 1, 1.0, "finished"),
    ]  # fmt: skip
    records = {r.episode_id: r for r in load_episodes(tmp_path)}
    branches = [r for r in records.values() if "parent_episode_id" in r.metadata]
    assert len(branches) == 4 and all(r.metadata["branch_step"] == 1 for r in branches)
    parents = {records[b.metadata["parent_episode_id"]].episode_id for b in branches}
    assert len(parents) == 2  # one shared prefix per group, recorded as the branches' parent
    assert {records[p].metadata["group_id"] for p in parents} == {"g0", "g1"}


def test_gym_env_snapshot_and_restore() -> None:
    from ares.wrappers.gym import AresGymEnv

    source = AresGymEnv(ares.make("humaneval", tasks="0:1"))
    target = AresGymEnv(ares.make("humaneval", tasks="0:1"))
    try:
        source.reset(seed=0)
        source.step(FMT.command("echo gym > /workspace/g.txt"))
        snapshot = source.unwrapped.snapshot()  # type: ignore[attr-defined]
        observation, _ = target.unwrapped.restore(snapshot)  # type: ignore[attr-defined]
        assert observation == snapshot.observation
        observation, _, terminated, truncated, _ = target.step(FMT.command("cat /workspace/g.txt"))
        assert "gym" in observation.messages[-1].text and not (terminated or truncated)
    finally:
        source.close()
        target.close()
