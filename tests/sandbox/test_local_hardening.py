"""How the local sandbox is hardened, checked from the host: id mapping, layers on disk, output bounds,
the seccomp policy and what survives an agent that attacks its own sandbox."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ares.errors import SandboxCrashedError, SandboxUnavailableError
from ares.sandbox import SandboxSpec, SeccompPolicy
from ares.sandbox.local import LocalSandbox, userns
from ares.sandbox.local import sandbox as sandbox_module

ROOT = os.geteuid() == 0


def host_uid(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError("no Uid line")


async def test_sandbox_root_is_never_host_root(sandbox: LocalSandbox) -> None:
    first, size = sandbox.host_ids
    uid_map = (await sandbox.exec("cat /proc/self/uid_map")).stdout.split()
    assert uid_map == ["0", str(first), str(size)] and first != 0
    assert host_uid(sandbox.host_pid) == first  # pid 1, seen from the host
    if ROOT:
        assert first >= userns.BASE and size == userns.BLOCK


@pytest.mark.skipif(not ROOT, reason="id ranges and idmapped layers are for root-run sandboxes")
async def test_layers_look_root_owned_inside_and_stay_canonical_on_disk(sandbox: LocalSandbox) -> None:
    inside = await sandbox.exec(
        "stat -c '%u:%g' /usr/bin /etc/passwd; touch /usr/new; chown 1000:1000 /usr/new"
    )
    assert inside.stdout.split() == ["0:0", "0:0"] and inside.ok
    created = await sandbox.exec("echo hi > /root/note && stat -c '%u' /root/note")
    assert created.stdout == "0\n"
    on_disk = sandbox.diff_dir
    assert (on_disk / "_root" / "root" / "note").stat().st_uid == 0  # canonical: a layer for any range
    assert (on_disk / "usr" / "new").stat().st_uid == 1000


@pytest.mark.skipif(not ROOT, reason="id ranges are for root-run sandboxes")
async def test_concurrent_sandboxes_get_their_own_range() -> None:
    async with LocalSandbox() as a, LocalSandbox() as b:
        assert a.host_ids[0] != b.host_ids[0]
        fork = await a.fork_frozen()
        async with fork:
            assert fork.host_ids[0] not in (a.host_ids[0], b.host_ids[0])


async def test_users_of_the_image_map_inside_the_range(sandbox: LocalSandbox) -> None:
    as_nobody = await sandbox.exec("id -u; touch /tmp/n && stat -c %u /tmp/n", user="nobody")
    as_root = await sandbox.exec("id -u", user="0:0")  # USER root works in every mode
    assert as_root.stdout == "0\n" and as_root.ok
    if ROOT:
        assert as_nobody.stdout.split() == ["65534", "65534"]
    else:  # one id mapped: switching users is refused with a clear message
        assert as_nobody.exit_code != 0 and "cannot switch to user" in as_nobody.stderr


async def test_long_output_keeps_head_and_tail() -> None:
    async with LocalSandbox(output_limit=1000) as sb:
        result = await sb.exec("seq 1 100000")
        assert result.ok and result.limit_hit == "output"
        assert result.stdout.startswith("1\n2\n3\n") and result.stdout.endswith("99999\n100000\n")
        assert "bytes of output omitted]" in result.stdout and len(result.stdout) < 1100
        short = await sb.exec("echo short")
        assert short.stdout == "short\n" and short.limit_hit is None


async def test_background_writers_never_block_or_grow(sandbox: LocalSandbox) -> None:
    started = await sandbox.exec("(yes > /dev/stdout &) ; echo started")
    assert started.stdout.startswith("started") or "started" in started.stdout
    for _ in range(3):
        assert (await sandbox.exec("echo alive", timeout_s=10)).stdout == "alive\n"
    assert (await sandbox.exec("pkill yes; echo stopped")).stdout.endswith("stopped\n")


async def test_downloads_are_not_cut_by_the_output_limit(tmp_path: Path) -> None:
    async with LocalSandbox(output_limit=1000) as sb:
        assert (await sb.exec("head -c 100000 /dev/urandom > blob")).ok
        await sb.download("/workspace/blob", tmp_path / "blob")
        assert (tmp_path / "blob").stat().st_size == 100000


async def test_killing_every_process_loses_only_that_command(sandbox: LocalSandbox) -> None:
    killed = await sandbox.exec("kill -9 -1")
    assert killed.exit_code == 137 and "killed from inside" in killed.stderr
    for signal_name in ("INT", "TERM", "HUP", "KILL"):
        await sandbox.exec(f"kill -{signal_name} 1")
    assert (await sandbox.exec("echo alive")).stdout == "alive\n"


async def test_seccomp_default_and_relaxed() -> None:
    probe = "unshare -U true && echo nested; grep Seccomp: /proc/self/status"
    async with LocalSandbox() as strict:
        result = await strict.exec(probe)
        assert "nested" not in result.stdout and "Seccomp:\t2" in result.stdout
    async with LocalSandbox(SandboxSpec(seccomp=SeccompPolicy(profile="unconfined"))) as loose:
        assert "Seccomp:\t0" in (await loose.exec(probe)).stdout
    allow = SandboxSpec(seccomp=SeccompPolicy(allow=("unshare", "clone")))
    async with LocalSandbox(allow) as relaxed:
        assert (await relaxed.exec(probe)).stdout.startswith("nested")


async def test_unknown_seccomp_settings_are_refused() -> None:
    with pytest.raises(SandboxUnavailableError, match="unknown syscalls: not_a_syscall"):
        await LocalSandbox(SandboxSpec(seccomp=SeccompPolicy(allow=("not_a_syscall",)))).start()
    with pytest.raises(SandboxUnavailableError, match="unknown seccomp profile"):
        await LocalSandbox(SandboxSpec(seccomp=SeccompPolicy(profile="lenient"))).start()


async def test_a_crashed_sandbox_keeps_its_files_for_verification(monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent that freezes its command's supervisor makes the sandbox stop answering; the episode
    must still be able to verify what it wrote."""
    monkeypatch.setattr(sandbox_module, "EXEC_GRACE_S", 0.5)
    sb = LocalSandbox()
    await sb.start()
    try:
        assert (await sb.exec("echo solved > answer")).ok
        with pytest.raises(SandboxCrashedError):
            await sb.exec("kill -STOP $PPID; sleep 30", timeout_s=0.5)
        assert sb.crashed is not None and not sb.running
        fork = await sb.fork_frozen()
        async with fork:
            assert (await fork.exec("cat answer")).stdout == "solved\n"
    finally:
        await sb.stop()
