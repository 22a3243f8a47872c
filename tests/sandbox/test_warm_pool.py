"""WarmPool over real local sandboxes: hits and misses, replacement of dead sandboxes, refill failures,
concurrent starts, closing, forwarding to the verifier, and cleanup when the process is interrupted."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import ares
from ares.errors import SandboxError, SandboxUnavailableError
from ares.policies import make_policy
from ares.sandbox import SandboxSpec
from ares.sandbox.capabilities import Capability
from ares.sandbox.local import LocalSandbox, OverlayMount, RootfsPlan, prelaunch
from ares.sandbox.warm_pool import WarmPool, spec_key
from interruptible import popen_interruptible

SRC = Path(__file__).resolve().parents[2] / "src"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
#: A root whose only layer does not exist: the overlay mount, and so the start, fails for real.
BROKEN_PLAN = RootfsPlan((OverlayMount("/", ("/nonexistent/ares-layer",)),))


class Recorder:
    """A LocalSandbox factory that remembers what it made and can be switched to make broken ones."""

    def __init__(self) -> None:
        self.created: list[LocalSandbox] = []
        self.broken = False
        self.made = asyncio.Event()

    def __call__(self, spec: SandboxSpec) -> LocalSandbox:
        sandbox = LocalSandbox(spec, plan=BROKEN_PLAN if self.broken else None)
        self.created.append(sandbox)
        self.made.set()
        return sandbox

    @property
    def running(self) -> list[LocalSandbox]:
        return [sb for sb in self.created if sb.running]


def descendants(root: int) -> list[int]:
    """Host pids below ``root`` (children, grandchildren, ...)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [], [root]
    while frontier:
        frontier = [pid for pid, ppid in parents.items() if ppid in frontier]
        found += frontier
    return found


def sandbox_inits() -> list[int]:
    """Sandbox init processes started by this test process (not the pre-launched inits that wait
    for a sandbox to adopt them: those are the process's, like its zygote)."""
    deadline = time.monotonic() + 5
    while prelaunch.filling() and time.monotonic() < deadline:
        time.sleep(0.01)
    waiting = set(prelaunch.waiting_pids())
    out = []
    for pid in (p for p in descendants(os.getpid()) if p not in waiting):
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"ares-init\0"):
                out.append(pid)
        except OSError:
            pass
    return out


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture
async def recorder():
    rec = Recorder()
    yield rec
    for sandbox in rec.created:
        await sandbox.stop()


# ---------------------------------------------------------------------------------------- keys
def test_spec_key_is_canonical() -> None:
    a = SandboxSpec(env={"A": "1", "B": "2"})
    b = SandboxSpec(env={"B": "2", "A": "1"})
    assert spec_key(a) == spec_key(b) and hash(spec_key(a)) == hash(spec_key(b))
    assert spec_key(a) != spec_key(SandboxSpec(env={"A": "1"}))
    assert spec_key(a) != spec_key(SandboxSpec(env={"A": "1", "B": "2"}, network=True))
    with pytest.raises(TypeError):
        spec_key(SandboxSpec(env={"A": bytearray(b"unhashable")}))  # type: ignore[dict-item]


def test_bad_sizes_are_rejected() -> None:
    with pytest.raises(ValueError, match="size"):
        WarmPool(LocalSandbox, size=0)
    with pytest.raises(ValueError, match="warm_pool"):
        ares.make("humaneval", tasks="0", warm_pool=-1)


# ---------------------------------------------------------------------------------------- hits
async def test_hits_come_from_the_pool_and_misses_start_fresh(recorder: Recorder) -> None:
    spec = SandboxSpec(env={"K": "v"})
    async with WarmPool(recorder, size=1) as pool:
        await pool.warm(spec)
        assert pool.stats.ready == 1 and len(recorder.created) == 1
        lease = pool(SandboxSpec(env={"K": "v"}))  # an equal spec, not the same object
        await lease.start()
        assert lease.inner is recorder.created[0]
        assert (await lease.exec("echo $K")).stdout == "v\n"
        await pool.warm(spec)  # wait for the background refill
        other = pool(SandboxSpec(env={"K": "other"}))
        await other.start()
        assert other.inner not in recorder.created[:2]
        assert (pool.stats.hits, pool.stats.misses, pool.stats.replaced) == (1, 1, 0)
        await lease.stop()
        await other.stop()
        assert lease.inner.running is False  # type: ignore[attr-defined]


async def test_each_episode_gets_a_fresh_sandbox(recorder: Recorder) -> None:
    async with WarmPool(recorder, size=1) as pool:
        await pool.warm(SandboxSpec())
        first = pool(SandboxSpec())
        await first.start()
        await first.exec("echo secret > /workspace/left-behind")
        await first.stop()
        await pool.warm(SandboxSpec())
        second = pool(SandboxSpec())
        await second.start()
        assert second.inner is not first.inner
        assert (await second.exec("ls /workspace")).stdout == ""
        assert pool.stats.hits == 2
        await second.stop()


async def test_dead_pooled_sandboxes_are_replaced(recorder: Recorder) -> None:
    async with WarmPool(recorder, size=2) as pool:
        await pool.warm(SandboxSpec())
        stopped, crashed = recorder.created
        await stopped.stop()
        for pid in sandbox_inits():
            os.kill(pid, signal.SIGKILL)  # crash the pooled sandbox still running, from outside
        lease = pool(SandboxSpec())
        await lease.start()
        assert (await lease.exec("echo fine")).stdout == "fine\n"
        assert lease.inner not in (stopped, crashed)
        # Both dead ones were replaced; the lease is a fresh start, or a refill that won the race.
        assert pool.stats.replaced == 2 and pool.stats.hits + pool.stats.misses == 1
        assert not crashed.running
        await lease.stop()


async def test_refill_failure_is_recorded_and_start_falls_back(recorder: Recorder) -> None:
    async with WarmPool(recorder, size=1) as pool:
        await pool.warm(SandboxSpec())
        recorder.broken = True
        lease = pool(SandboxSpec())
        await lease.start()  # a hit; the refill behind it fails
        with pytest.raises(SandboxError, match="warm pool could not start"):
            await pool.warm(SandboxSpec())
        assert pool.stats.refill_failures >= 1
        assert isinstance(pool.last_refill_error, SandboxUnavailableError)
        doomed = pool(SandboxSpec())
        with pytest.raises(SandboxUnavailableError) as failure:
            await doomed.start()  # the fresh start fails too: its own error surfaces
        assert any("refill also failed" in note for note in failure.value.__notes__)
        await doomed.stop()
        recorder.broken = False
        fallback = pool(SandboxSpec())
        await fallback.start()
        assert (await fallback.exec("echo ok")).stdout == "ok\n"
        await lease.stop()
        await fallback.stop()
    assert recorder.running == []


async def test_concurrent_starts_each_get_their_own_sandbox(recorder: Recorder) -> None:
    async with WarmPool(recorder, size=2) as pool:
        await pool.warm(SandboxSpec())
        leases = [pool(SandboxSpec()) for _ in range(6)]
        await asyncio.gather(*(lease.start() for lease in leases))
        inners = {id(lease.inner) for lease in leases}
        assert len(inners) == 6
        results = await asyncio.gather(*(lease.exec("true") for lease in leases))
        assert all(r.ok for r in results)
        # The first two starts take the two ready sandboxes before any refill can land.
        assert (pool.stats.hits, pool.stats.misses) == (2, 4)
        await asyncio.gather(*(lease.stop() for lease in leases))


# ---------------------------------------------------------------------------------------- closing
async def test_aclose_stops_pooled_and_in_flight_sandboxes(recorder: Recorder) -> None:
    pool = WarmPool(recorder, size=2)
    await pool.warm(SandboxSpec())
    lease = pool(SandboxSpec())
    recorder.made.clear()
    await lease.start()
    await recorder.made.wait()  # the refill has begun starting its sandbox
    await pool.aclose()
    assert recorder.running == [lease.inner]  # only the sandbox handed out, which its user stops
    with pytest.raises(SandboxError):
        _ = recorder.created[2].diff_dir  # the cancelled refill's files are gone too
    await pool.aclose()  # idempotent
    with pytest.raises(SandboxError, match="closed"):
        await pool(SandboxSpec()).start()
    await lease.stop()
    assert recorder.running == [] and sandbox_inits() == []


async def test_pooled_sandbox_forwards_backend_capabilities(recorder: Recorder) -> None:
    async with WarmPool(recorder, size=1) as pool:
        lease = pool(SandboxSpec())
        assert lease.capabilities == frozenset()  # nothing to forward before start
        with pytest.raises(SandboxError, match="start"):
            await lease.exec("true")
        async with lease:
            assert lease.capabilities == LocalSandbox.capabilities - {Capability.RESTORE}
            await lease.exec("echo data > /workspace/f")
            inner = lease.inner
            assert isinstance(inner, LocalSandbox)
            assert (inner.diff_dir / "_root" / "workspace" / "f").read_text() == "data\n"
            frozen = await lease.fork_frozen()
            async with frozen:
                assert (await frozen.exec("cat /workspace/f")).stdout == "data\n"
            with pytest.raises(SandboxError):
                await lease.start()


# ---------------------------------------------------------------------------------------- environments
async def test_environment_with_a_shared_pool_hits_and_scores(recorder: Recorder) -> None:
    async with WarmPool(recorder, size=1) as pool:
        env = ares.make("humaneval", tasks="0:3", sandbox_factory=pool)
        async with env:
            for index in range(3):
                await pool.warm(env.tasks[index].sandbox_spec())
                ts = await env.reset(task=index)
                assert env.task is not None
                policy = make_policy("oracle")(env.task, env.action_format)
                while not ts.last():
                    ts = await env.step(await policy.act(ts.observation))
                assert ts.reward == 1.0
        assert pool.stats.hits == 3 and pool.stats.misses == 0
        assert recorder.running == [recorder.created[-1]]  # the one refilled after the last reset
    assert recorder.running == []


async def test_make_warm_pool_is_closed_with_the_environment(recorder: Recorder) -> None:
    env = ares.make(
        "harbor", path=FIXTURES / "harbor", tasks="json-reward", sandbox_factory=recorder, warm_pool=1
    )
    async with env:
        for _ in range(2):
            ts = await env.reset()
            assert env.task is not None
            policy = make_policy("oracle")(env.task, env.action_format)
            while not ts.last():
                ts = await env.step(await policy.act(ts.observation))
            assert ts.reward is not None and ts.reward > 0
    assert len(recorder.created) >= 2 and recorder.running == []
    assert sandbox_inits() == []


# ---------------------------------------------------------------------------------------- interruption
CHILD = textwrap.dedent(
    """
    import asyncio, json, os, sys
    from ares.sandbox import SandboxSpec
    from ares.sandbox.local import LocalSandbox
    from ares.sandbox.warm_pool import WarmPool

    def tree(root):
        parents = {}
        for e in os.listdir("/proc"):
            if e.isdigit():
                try:
                    parents[int(e)] = int(open(f"/proc/{e}/stat").read().rsplit(")", 1)[1].split()[1])
                except OSError:
                    pass
        found, frontier = [], [root]
        while frontier:
            frontier = [p for p, pp in parents.items() if pp in frontier]
            found += frontier
        return found

    async def main():
        pool = WarmPool(LocalSandbox, size=2)
        await pool.warm(SandboxSpec())
        print(json.dumps({"ready": pool.stats.ready, "pids": tree(os.getpid())}), flush=True)
        if sys.argv[1] == "wait":
            await asyncio.sleep(60)

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("how", ["exit", signal.SIGTERM, signal.SIGINT])
def test_interrupted_process_leaves_no_pooled_sandbox(tmp_path: Path, how: str | signal.Signals) -> None:
    env = {**os.environ, "ARES_SANDBOX_DIR": str(tmp_path / "state"), "PYTHONPATH": str(SRC)}
    mode = "exit" if how == "exit" else "wait"
    child = popen_interruptible(
        [sys.executable, "-c", CHILD, mode], stdout=subprocess.PIPE, text=True, env=env
    )
    line = child.stdout.readline()  # type: ignore[union-attr]
    assert line, f"the child failed: exit code {child.wait(30)}"
    report = json.loads(line)
    assert report["ready"] == 2 and len(report["pids"]) >= 2
    if isinstance(how, signal.Signals):
        child.send_signal(how)
    child.wait(30)
    child.stdout.close()  # type: ignore[union-attr]
    # The kernel reaps a dead pid namespace's processes asynchronously: allow it a moment.
    deadline = time.monotonic() + 10
    while (survivors := [pid for pid in report["pids"] if alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert survivors == []
    sandboxes = [p for d in (tmp_path / "state").iterdir() for p in d.glob("sandboxes/*")]
    assert sandboxes == []


def test_docs_example_runs(tmp_path: Path) -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "sandbox.md").read_text()
    section = doc.split("## Warm pool", 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    env = {**os.environ, "ARES_SANDBOX_DIR": str(tmp_path / "state"), "PYTHONPATH": str(SRC)}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["hi", "1", "0"]


def test_cli_run_with_a_warm_pool(tmp_path: Path) -> None:
    exe = shutil.which("ares", path=str(Path(sys.executable).parent))
    cmd = [exe] if exe else [sys.executable, "-m", "ares.cli.main"]
    env = {**os.environ, "ARES_SANDBOX_DIR": str(tmp_path / "state")}
    args = [
        "run",
        "humaneval",
        "--tasks",
        "0:3",
        "-c",
        "1",
        "--warm-pool",
        "1",
        "--out",
        str(tmp_path / "out"),
    ]
    result = subprocess.run([*cmd, *args], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["episodes"] == 3 and summary["pass_rate"] == 1.0
    bad = subprocess.run([*cmd, *args[:2], "--warm-pool", "-1"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--warm-pool" in bad.stderr
