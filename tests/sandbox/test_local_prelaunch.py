"""Pre-launched inits: a sandbox that adopts one is limited, isolated and cleaned up like any other."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ares.sandbox import Resources, SandboxSpec
from ares.sandbox.local import LocalSandbox, cgroups, prelaunch, workspace

MIB = 1 << 20
SPEC = SandboxSpec(resources=Resources(memory_mb=256, pids=64))


def host_cgroup(pid: int, controller: str) -> Path | None:
    """The host dir of ``pid``'s cgroup in ``controller``'s v1 hierarchy (None under v2 only)."""
    hierarchy = cgroups.available()[controller]
    if isinstance(hierarchy, str) or hierarchy.version != 1:
        return None
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return hierarchy.mount / path.lstrip("/")
    return None


@pytest.fixture(autouse=True)
def two_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pre-launching is opt-in: these tests turn it on (2 inits, as the benchmarks ran it)."""
    monkeypatch.setenv(prelaunch.ENV_SIZE, "2")


async def one_waiting() -> None:
    """Wait until the background thread has an init ready (it starts with the first sandbox)."""
    async with LocalSandbox(SPEC):
        pass
    for _ in range(500):
        if prelaunch.waiting():
            return
        await asyncio.sleep(0.01)
    pytest.skip("no init was pre-launched here (no cgroup hierarchy or no zygote)")


async def test_an_adopted_init_is_limited_like_a_fresh_one() -> None:
    await one_waiting()
    async with LocalSandbox(SPEC) as sb:
        assert sb.limits.memory is not None and sb.limits.pids is not None
        assert sb._init_log_fd is not None  # it adopted a waiting init (its log is a memfd)
        memory = host_cgroup(sb.host_pid, "memory")
        if sb.limits.memory.mechanism == "cgroup-v1" and memory is not None:
            # pid 1 (forked after the limits were written) is in the cgroup that holds the limit.
            assert int((memory / "memory.limit_in_bytes").read_text()) == 256 * MIB
        pids = host_cgroup(sb.host_pid, "pids")
        if sb.limits.pids.mechanism == "cgroup-v1" and pids is not None:
            assert (pids / "pids.max").read_text().strip() == str(64 + 4)
        result = await sb.exec("cat /proc/self/cgroup; echo ok")
        assert result.ok and result.stdout.rstrip().endswith("ok")
        # The cgroup namespace hides the host paths, as for an init attached on the spot.
        assert "ares-sandboxes" not in result.stdout
        held = [p for p in (memory, pids) if p is not None]
    assert [p for p in held if p.exists()] == []


async def test_waiting_inits_leave_no_files_and_the_switch_turns_them_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = set((workspace.process_dir()).iterdir())
    await one_waiting()
    assert set((workspace.process_dir()).iterdir()) - before == set()  # waiting inits write no file
    monkeypatch.setenv(prelaunch.ENV_SIZE, "0")
    assert prelaunch.take() is None
    async with LocalSandbox(SPEC) as sb:
        assert sb._init_log_fd is None and sb._init_log == sb.diff_dir.parent / "init.log"
        assert (await sb.exec("true")).ok
