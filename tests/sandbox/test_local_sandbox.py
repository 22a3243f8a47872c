"""The local sandbox against the real kernel: namespaces, overlayfs, timeouts, isolation, cleanup."""

from __future__ import annotations

import asyncio
import os
import select
import signal
import time
from pathlib import Path

import pytest

from ares.errors import SandboxCrashedError, SandboxError, SandboxKilledError
from ares.sandbox import SandboxSpec
from ares.sandbox.base import Resources, SeccompPolicy
from ares.sandbox.local import LocalSandbox

COUNT_SLEEPERS = "grep -lx 'sleep' /proc/[0-9]*/comm 2>/dev/null | wc -l"


def host_processes_with(needle: str) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            if needle.encode() in cmdline:
                pids.append(int(entry))
    return pids


async def test_exec_reports_output_exit_code_and_duration(sandbox: LocalSandbox) -> None:
    result = await sandbox.exec("echo out; echo err >&2; exit 3")
    assert (result.stdout, result.stderr, result.exit_code, result.timed_out) == ("out\n", "err\n", 3, False)
    assert result.duration_s > 0


async def test_exec_cwd_env_and_stdin(sandbox: LocalSandbox) -> None:
    assert (await sandbox.exec("pwd")).stdout == "/workspace\n"
    assert (await sandbox.exec("pwd", cwd="/tmp")).stdout == "/tmp\n"
    assert (await sandbox.exec("echo $GREETING", env={"GREETING": "hi"})).stdout == "hi\n"
    assert (await sandbox.exec("tr a-z A-Z", stdin=b"shout")).stdout == "SHOUT"
    missing = await sandbox.exec("true", cwd="/does/not/exist")
    assert missing.exit_code != 0 and "/does/not/exist" in missing.stderr


async def test_timeout_kills_sleep_and_its_children(sandbox: LocalSandbox) -> None:
    result = await sandbox.exec("sleep 1000 & (sleep 1000 &) ; sleep 1000", timeout_s=0.5)
    assert result.timed_out
    assert result.exit_code == 137
    assert (await sandbox.exec(COUNT_SLEEPERS)).stdout.strip() == "0"
    assert host_processes_with("sleep 1000") == []


async def test_background_process_survives_between_execs(sandbox: LocalSandbox) -> None:
    started = await sandbox.exec("sleep 1234 > /dev/null 2>&1 & echo $!")
    assert started.ok
    pid = started.stdout.strip()
    seen = await sandbox.exec(f"cat /proc/{pid}/cmdline | tr '\\0' ' '")
    assert seen.stdout.strip() == "sleep 1234"


async def test_background_output_does_not_block_exec(sandbox: LocalSandbox) -> None:
    result = await asyncio.wait_for(sandbox.exec("(sleep 3; echo late) & echo now", timeout_s=10), 2.5)
    assert result.stdout == "now\n"


async def test_host_environment_and_home_dirs_are_invisible(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARES_TEST_SECRET", "hunter2")
    async with LocalSandbox() as sb:
        env = await sb.exec("env")
        assert "hunter2" not in env.stdout and "ARES_TEST_SECRET" not in env.stdout
        listing = await sb.exec("ls -A /root /home /tmp")
        assert listing.stdout.split() == ["/home:", "/root:", "/tmp:"]
        project = Path(__file__).resolve().parents[2]
        assert (await sb.exec(f"ls {project}")).exit_code != 0
        assert (await sb.exec("cat /etc/shadow")).stdout == ""
        assert (await sb.exec(f"ls {Path.home()}")).stdout == ""


async def test_network_is_off_unless_asked() -> None:
    probe = "python3 -c \"import socket; socket.create_connection(('10.255.255.1', 80), timeout=1)\""
    async with LocalSandbox() as sb:
        interfaces = (await sb.exec("tail -n +3 /proc/net/dev | cut -d: -f1")).stdout.split()
        assert interfaces == ["lo"]
        result = await sb.exec(probe)
        assert result.exit_code != 0 and "unreachable" in result.stderr.lower()
        assert (
            await sb.exec(
                "python3 -m http.server 8765 >/dev/null 2>&1 & sleep 0.5; "
                "python3 -c \"import urllib.request as u; u.urlopen('http://127.0.0.1:8765')\""
            )
        ).ok
    async with LocalSandbox(SandboxSpec(network=True)) as sb:
        interfaces = (await sb.exec("tail -n +3 /proc/net/dev | cut -d: -f1")).stdout.split()
        assert len(interfaces) > 1


async def test_sandbox_root_has_no_host_privileges(sandbox: LocalSandbox) -> None:
    assert (await sandbox.exec("mount -t tmpfs none /mnt")).exit_code != 0
    assert (await sandbox.exec("kill -9 1; sleep 0.1; echo alive")).stdout.strip().endswith("alive")
    assert (await sandbox.exec("echo ok")).ok
    assert (await sandbox.exec("cat /proc/1/environ")).exit_code != 0


async def test_writes_land_in_the_upper_dir_only(sandbox: LocalSandbox) -> None:
    assert (await sandbox.exec("echo new > /usr/ares-probe && rm /etc/hostname && mkdir -p /opt/x")).ok
    assert not Path("/usr/ares-probe").exists()
    assert Path("/etc/hostname").exists() or not Path("/etc").exists()
    assert (sandbox.diff_dir / "usr" / "ares-probe").read_text() == "new\n"


async def test_upload_download_and_read_file(sandbox: LocalSandbox, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "nested").mkdir(parents=True)
    (src / "nested" / "a.txt").write_text("alpha")
    (src / "b.bin").write_bytes(bytes(range(256)))
    await sandbox.upload(src, "/workspace/tree")
    await sandbox.upload({"x/y.txt": "why", "run.sh": "echo hi"}, "/workspace/mem")
    single = tmp_path / "single.txt"
    single.write_text("one file")
    await sandbox.upload(single, "/opt/renamed.txt")
    assert await sandbox.read_file("/workspace/tree/nested/a.txt") == b"alpha"
    assert await sandbox.read_file("/workspace/mem/x/y.txt") == b"why"
    assert await sandbox.read_file("/opt/renamed.txt") == b"one file"
    assert (await sandbox.exec("bash /workspace/mem/run.sh")).stdout == "hi\n"
    await sandbox.download("/workspace/tree", tmp_path / "back")
    assert (tmp_path / "back" / "b.bin").read_bytes() == bytes(range(256))
    await sandbox.download("/workspace/tree/nested/a.txt", tmp_path / "a-copy.txt")
    assert (tmp_path / "a-copy.txt").read_text() == "alpha"
    with pytest.raises(SandboxError, match="no-such-file"):
        await sandbox.read_file("/no-such-file")


def _dies(pid: int, within_s: float = 10.0) -> bool:
    """Whether ``pid`` is gone or dead (a zombie awaiting its reaper), waiting a little: on a loaded
    host the kernel may still be tearing the killed namespace down when stop() returns."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            os.kill(pid, 0)
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (ProcessLookupError, FileNotFoundError):
            return True
        if state in ("Z", "X"):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


async def test_stop_leaves_no_process_mount_or_dir() -> None:
    sb = LocalSandbox()
    await sb.start()
    await sb.exec("sleep 4321 > /dev/null 2>&1 &")
    pids = list(sb._pids)
    state_dir = sb.diff_dir.parent
    await sb.stop()
    for pid in pids:
        assert _dies(pid), f"pid {pid} is still alive after stop()"
    assert host_processes_with("sleep 4321") == []
    assert not state_dir.exists()
    mounts = [Path(f"/proc/{p}/mountinfo") for p in os.listdir("/proc") if p.isdigit()]
    for info in mounts:
        try:
            assert str(state_dir) not in info.read_text()
        except OSError:
            continue
    await sb.stop()  # idempotent


async def test_crashed_sandbox_gives_a_clear_error() -> None:
    sb = LocalSandbox()
    await sb.start()
    pid = sb._pids[0]
    os.kill(pid, 9)
    for _ in range(500):  # a SIGKILL is delivered asynchronously: wait until pid 1 is dead
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(") ", 1)[1].startswith(("Z", "X")):
                    break
        except (FileNotFoundError, ProcessLookupError):
            break
        await asyncio.sleep(0.01)
    with pytest.raises(SandboxCrashedError, match=r"died|gone"):
        await sb.exec("true")
    with pytest.raises(SandboxError):
        await sb.exec("true")
    await sb.stop()


async def _killed_from_host(sb: LocalSandbox) -> BaseException:
    """SIGKILL pid 1 from the host (as an operator or the host's OOM killer would): the next error."""
    pidfd = os.pidfd_open(sb._pids[0])
    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    await asyncio.to_thread(select.select, [pidfd], [], [], 30.0)  # readable once pid 1 is dead
    os.close(pidfd)
    with pytest.raises(SandboxCrashedError) as raised:
        await sb.exec("true")
    return raised.value


LIMITED = Resources(memory_mb=256, pids=128)


@pytest.mark.skipif(os.geteuid() != 0, reason="cgroups count memory and processes as root here")
async def test_a_kill_from_outside_is_told_from_one_the_sandbox_may_have_caused() -> None:
    """Only with cgroups that counted no OOM kill and no refused fork, and the syscall filter that
    stops commands from lowering pid 1's rlimits, is a dead pid 1 known to be killed from outside."""
    clean = LocalSandbox(SandboxSpec(resources=LIMITED))
    await clean.start()
    try:
        assert "cgroup" in str(clean._limits.report)
        assert type(await _killed_from_host(clean)) is SandboxKilledError
    finally:
        await clean.stop()
    oomed = LocalSandbox(SandboxSpec(resources=LIMITED))
    await oomed.start()
    try:
        hog = await oomed.exec("python3 -c 'b = bytearray(1 << 30)'")
        assert hog.limit_hit == "memory"  # the OOM kill is counted: pid 1 might be next
        assert type(await _killed_from_host(oomed)) is SandboxCrashedError
    finally:
        await oomed.stop()
    relaxed = LocalSandbox(SandboxSpec(resources=LIMITED, seccomp=SeccompPolicy(allow=("prlimit64",))))
    await relaxed.start()
    try:
        assert type(await _killed_from_host(relaxed)) is SandboxCrashedError
    finally:
        await relaxed.stop()
    by_rlimits = LocalSandbox(SandboxSpec(resources=LIMITED), limit_mode="rlimit")  # nothing counts
    await by_rlimits.start()
    try:
        assert type(await _killed_from_host(by_rlimits)) is SandboxCrashedError
    finally:
        await by_rlimits.stop()


async def test_concurrent_execs_do_not_mix_outputs(sandbox: LocalSandbox) -> None:
    results = await asyncio.gather(*(sandbox.exec(f"sleep 0.0{i % 5}; echo {i}") for i in range(20)))
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(20)]


async def test_frozen_fork_sees_the_diff_but_no_processes(sandbox: LocalSandbox) -> None:
    await sandbox.exec("echo kept > /workspace/file; sleep 999 > /dev/null 2>&1 &")
    fork = await sandbox.fork_frozen()
    async with fork:
        assert await fork.read_file("/workspace/file") == b"kept\n"
        assert (await fork.exec(COUNT_SLEEPERS)).stdout.strip() == "0"
        assert (await fork.exec("echo more > /workspace/file")).ok
    with pytest.raises(SandboxError):
        await sandbox.exec("true")


@pytest.mark.parametrize("cmd", ["env", "true", "ls /", "id -u", "no-such-command", "ls /missing", "false"])
async def test_plain_commands_behave_as_under_bash(sandbox: LocalSandbox, cmd: str) -> None:
    direct = await sandbox.exec(cmd)
    shell = await sandbox.exec(f"{cmd} ;")  # the trailing ';' forces the bash path
    assert direct.exit_code == shell.exit_code
    assert sorted(direct.stdout.splitlines()) == sorted(shell.stdout.splitlines())
    assert direct.stderr == shell.stderr
