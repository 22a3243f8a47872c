"""Resource limits of the local sandbox against the real kernel: cgroups, tmpfs and the rlimit fallback."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import pytest

from ares.errors import SandboxError
from ares.sandbox import Resources, SandboxSpec
from ares.sandbox.local import LocalSandbox, limits

MIB = 1 << 20
# Grows by 1 MiB at a time until something stops it; prints how far it got when refused.
MEMORY_HOG = """python3 -c '
chunks = []
try:
    while True:
        chunks.append(bytearray(1 << 20))
except MemoryError:
    raise SystemExit(f"MemoryError after {len(chunks)} MiB")
'"""
# Forks children that wait on a pipe until a fork is refused, then reaps them all and says how many.
FORK_BOMB = """python3 -c '
import os, sys
r, w = os.pipe()
children = []
try:
    for _ in range(10_000):
        pid = os.fork()
        if pid == 0:
            os.close(w)
            os.read(r, 1)
            os._exit(0)
        children.append(pid)
except OSError as exc:
    print(len(children), exc.strerror)
os.close(w)
for pid in children:
    os.waitpid(pid, 0)
sys.exit(1 if len(children) < 10_000 else 0)
'"""
# Keeps taking every process slot that frees up, until its timeout kills it with all its children.
HOARDER = """python3 -c '
import os, time
while True:
    try:
        if os.fork() == 0:
            time.sleep(600)
            os._exit(0)
    except OSError:
        time.sleep(0.001)
'"""
CGROUP_MECHANISMS = {"cgroup-v1", "cgroup-v2"}

Started = Callable[..., AbstractAsyncContextManager[LocalSandbox]]


@pytest.fixture
def started() -> Started:
    """``async with started(resources, want=...) as sb``; skips unless each ``want`` uses a cgroup/tmpfs."""

    @asynccontextmanager
    async def start(
        resources: Resources, *, want: tuple[str, ...] = (), **kwargs: object
    ) -> AsyncIterator[LocalSandbox]:
        sandbox = LocalSandbox(SandboxSpec(resources=resources), **kwargs)  # type: ignore[arg-type]
        await sandbox.start()
        try:
            for name in want:
                enforcement = getattr(sandbox.limits, name)
                if enforcement.mechanism not in CGROUP_MECHANISMS | {"tmpfs"}:
                    pytest.skip(f"{name} is not enforced by a cgroup here: {enforcement.reason}")
            yield sandbox
        finally:
            await sandbox.stop()

    return start


async def cgroup_dir(sandbox: LocalSandbox, controller: str) -> Path:
    """The host dir of the cgroup ``sandbox`` runs in, read from the host (inside, a cgroup namespace
    shows it as /)."""
    lines = Path(f"/proc/{sandbox.host_pid}/cgroup").read_text().splitlines()
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return Path("/sys/fs/cgroup", controller) / path.lstrip("/")
    v2 = next(line.split(":", 2)[2] for line in lines if line.startswith("0::"))
    return Path("/sys/fs/cgroup") / v2.lstrip("/")


def mounted_under(path: Path) -> list[str]:
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f]
    return [p for p in points if p == str(path) or p.startswith(f"{path}/")]


async def test_memory_hog_is_killed_and_reported(started: Started) -> None:
    async with started(Resources(memory_mb=64), want=("memory",)) as sb:
        hog = await sb.exec(MEMORY_HOG, timeout_s=60)
        assert hog.limit_hit == "memory" and not hog.ok and not hog.timed_out
        assert hog.exit_code == 137  # SIGKILLed by the OOM killer, not the sandbox's init
        after = await sb.exec("echo alive")
        assert after.stdout == "alive\n" and after.limit_hit is None
        limit = int((await cgroup_dir(sb, "memory")).joinpath("memory.limit_in_bytes").read_text())
        assert limit == 64 * MIB


async def test_fork_bomb_hits_the_pids_limit_and_the_sandbox_still_answers(started: Started) -> None:
    async with started(Resources(pids=16), want=("pids",)) as sb:
        bomb = await sb.exec(FORK_BOMB, timeout_s=60)
        assert bomb.limit_hit == "pids" and not bomb.ok
        forked, reason = bomb.stdout.split(" ", 1)
        # The command may run `pids` processes: itself and 15 children. ARES's own are not counted.
        assert int(forked) == 15 and "temporarily unavailable" in reason
        # The bomb reaped its children: none is left holding the limit (the pattern skips grep itself).
        after = await sb.exec("echo alive; grep -l 'os[.]pipe' /proc/[0-9]*/cmdline | wc -l")
        assert after.stdout.split() == ["alive", "0"] and after.limit_hit is None


async def test_a_full_process_table_refuses_commands_but_the_sandbox_survives(started: Started) -> None:
    async with started(Resources(pids=8), want=("pids",)) as sb:
        hoarder = asyncio.create_task(sb.exec(HOARDER, timeout_s=3))
        for _ in range(1000):  # until the hoarder holds every slot
            refused = await sb.exec("echo hi")
            if refused.exit_code == 126:
                break
        assert refused.limit_hit == "pids" and "cannot start the command" in refused.stderr
        hoarded = await hoarder
        assert hoarded.timed_out and hoarded.limit_hit == "pids"
        assert (await sb.exec("echo back")).stdout == "back\n"


async def test_disk_filler_gets_enospc_and_the_host_disk_is_untouched(started: Started) -> None:
    async with started(Resources(storage_mb=16), want=("storage",)) as sb:
        assert sb.diff_dir.parent.stat().st_dev != sb.diff_dir.parent.parent.stat().st_dev
        assert mounted_under(sb.diff_dir.parent) == [str(sb.diff_dir.parent)]
        filler = await sb.exec("head -c 64M /dev/zero > big", timeout_s=60)
        assert filler.limit_hit == "disk" and filler.exit_code != 0
        assert "No space left on device" in filler.stderr
        big = sb.diff_dir / "_root" / "workspace" / "big"
        assert 0 < big.stat().st_size <= 16 * MIB
        assert (await sb.exec("rm big && echo freed")).stdout == "freed\n"
        assert (await sb.exec("head -c 1M /dev/zero > small && echo fits")).stdout == "fits\n"


async def test_cpus_become_a_cfs_quota(started: Started) -> None:
    async with started(Resources(cpus=0.5), want=("cpus",)) as sb:
        cpu = await cgroup_dir(sb, "cpu")
        if sb.limits.cpus is not None and sb.limits.cpus.mechanism == "cgroup-v2":
            assert cpu.joinpath("cpu.max").read_text().split() == ["50000", "100000"]
        else:
            assert int(cpu.joinpath("cpu.cfs_quota_us").read_text()) == 50_000
            assert int(cpu.joinpath("cpu.cfs_period_us").read_text()) == 100_000


async def test_stop_removes_the_cgroups_and_the_tmpfs(started: Started) -> None:
    resources = Resources(memory_mb=128, pids=64, cpus=1, storage_mb=32)
    async with started(resources, want=("memory", "pids", "cpus", "storage")) as sb:
        dirs = [await cgroup_dir(sb, c) for c in ("memory", "pids", "cpu")]
        sandbox_dir = sb.diff_dir.parent
        assert all(d.is_dir() and d.name.startswith(f"ares-{os.getpid()}-") for d in dirs)
        assert all(d.parent.name == "ares-sandboxes" for d in dirs)
        assert (await sb.exec("sleep 600 > /dev/null 2>&1 & echo started")).stdout == "started\n"
    assert [d for d in dirs if d.exists()] == []
    assert mounted_under(sandbox_dir) == [] and not sandbox_dir.exists()


async def test_report_names_the_mechanism_and_why(started: Started) -> None:
    only = Resources(memory_mb=128, storage_mb=32)
    async with started(only, want=("memory", "storage"), default_resources=Resources()) as sb:
        report = sb.limits
        assert report.pids is None and report.cpus is None
        assert report.memory is not None and "128 MiB" in report.memory.reason
        assert report.storage is not None and report.storage.mechanism == "tmpfs"
        assert "memory: cgroup-v" in str(report) and "storage: tmpfs" in str(report)
    async with started(Resources(), default_resources=Resources()) as plain:
        assert plain.limits.items() == []


async def test_default_limits_apply_when_the_task_sets_none(started: Started) -> None:
    """Every sandbox is limited: what the task leaves unset comes from DEFAULT_RESOURCES."""
    async with started(Resources(pids=100)) as sb:
        report = sb.limits
        assert report.memory is not None and report.storage is not None and report.pids is not None
        assert report.cpus is None  # no default CPU share: an idle machine lends its cores
        assert "pids.max 104" in report.pids.reason or report.pids.mechanism != "cgroup-v1"
        if report.memory.mechanism in CGROUP_MECHANISMS:
            limit = (await cgroup_dir(sb, "memory")).joinpath("memory.limit_in_bytes")
            if limit.exists():
                assert int(limit.read_text()) == limits.DEFAULT_RESOURCES.memory_mb * MIB  # type: ignore[operator]


async def test_rlimit_fallback_enforces_memory_and_file_size(started: Started) -> None:
    resources = Resources(memory_mb=256, storage_mb=8, cpus=1, pids=64)
    async with started(resources, limit_mode="rlimit") as sb:
        report = sb.limits
        assert report.memory is not None and report.memory.mechanism == "rlimit"
        assert report.storage is not None and report.storage.mechanism == "rlimit"
        assert report.cpus is not None and report.cpus.mechanism == "unenforced"
        assert report.pids is not None
        assert report.pids.mechanism == "rlimit"  # sandbox root is never host uid 0, so it binds
        assert "ares-" not in Path(f"/proc/{sb.host_pid}/cgroup").read_text()  # no cgroup of its own
        hog = await sb.exec(MEMORY_HOG, timeout_s=60)
        assert hog.limit_hit == "memory" and "MemoryError after" in hog.stderr
        assert int(hog.stderr.split()[-2]) < 256
        big = await sb.exec("head -c 64M /dev/zero > big", timeout_s=60)
        assert big.limit_hit == "disk" and big.exit_code == 128 + 25  # SIGXFSZ
        assert (await sb.exec("stat -c %s big")).stdout == f"{8 * MIB}\n"
        assert (await sb.exec("echo alive")).ok


async def test_limit_mode_from_the_environment(monkeypatch: pytest.MonkeyPatch, started: Started) -> None:
    monkeypatch.setenv("ARES_SANDBOX_LIMITS", "rlimit")
    async with started(Resources(memory_mb=512)) as sb:
        assert sb.limits.memory is not None and sb.limits.memory.mechanism == "rlimit"
    monkeypatch.setenv("ARES_SANDBOX_LIMITS", "cgroups-please")
    with pytest.raises(SandboxError, match="unknown limit mode 'cgroups-please'"):
        LocalSandbox()


async def test_limits_before_start_is_an_error() -> None:
    with pytest.raises(SandboxError, match="not been started"):
        _ = LocalSandbox().limits


async def test_verifier_fork_keeps_the_limits(started: Started) -> None:
    async with started(Resources(memory_mb=64, storage_mb=16), want=("memory", "storage")) as sb:
        assert (await sb.exec("echo agent > note")).ok
        fork = await sb.fork_frozen()
        async with fork:
            assert (await fork.exec("cat note")).stdout == "agent\n"
            assert fork.limits.memory is not None and fork.limits.memory.mechanism in CGROUP_MECHANISMS
            assert (await fork.exec(MEMORY_HOG, timeout_s=60)).limit_hit == "memory"
