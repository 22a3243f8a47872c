"""Sandbox inits forked by the zygote: lifetime, cleanliness, fallback to the direct spawn."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ares.errors import SandboxCrashedError
from ares.sandbox.local import LocalSandbox, zygote
from nobody_python import SKIP_REASON, can_drop, nobody_python

SRC = Path(__file__).resolve().parents[2] / "src"
# /proc/<pid>/status lines an init made by the zygote must share with a directly spawned one.
STATUS_KEYS = (
    "Umask", "Uid", "Gid", "Groups", "SigBlk", "SigIgn", "SigCgt", "CapInh", "CapPrm", "CapEff",
    "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp",
)  # fmt: skip


def stat_of(pid: int) -> tuple[str, int] | None:
    """(state, ppid) of ``pid``, or None if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0], int(fields[1])


def ppid(pid: int) -> int:
    found = stat_of(pid)
    assert found is not None, f"process {pid} is gone"
    return found[1]


def alive(pid: int) -> bool:
    found = stat_of(pid)
    return found is not None and found[0] != "Z"


def children(pid: int) -> list[tuple[int, str]]:
    """(pid, state) of every child of ``pid``."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (found := stat_of(int(entry))) is not None and found[1] == pid:
            out.append((int(entry), found[0]))
    return out


def eventually(check: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    fields = dict(line.split(":", 1) for line in lines if ":" in line)
    return {key: fields.get(key, "").strip() for key in STATUS_KEYS}


def fd_kinds(pid: int) -> list[str]:
    """What ``pid`` holds open, by kind (fd numbers and socket inodes vary between starts). The
    init's log is a file in the sandbox dir, or a memfd for a pre-launched init: both are "log"."""
    kinds = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        target = os.readlink(f"/proc/{pid}/fd/{fd}")
        kind = target.split(":", 1)[0] if ":" in target else Path(target).name
        kinds.append("log" if kind in ("init.log", "/memfd") else kind)
    return sorted(kinds)


async def kill_zygote() -> None:
    """SIGKILL this process's zygote (if any) and wait until the keeper has reaped it."""
    pid = zygote.current_pid()
    if pid is not None:
        os.kill(pid, signal.SIGKILL)
        assert await asyncio.to_thread(eventually, lambda: stat_of(pid) is None)


@pytest.fixture(autouse=True)
def zygote_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(zygote.ENV_SWITCH, raising=False)
    monkeypatch.setattr(zygote, "_failures", 0)


async def test_inits_are_forked_by_the_zygote() -> None:
    async with LocalSandbox() as sb:
        assert (await sb.exec("echo hi")).stdout == "hi\n"
        assert isinstance(sb._proc, zygote.ZygoteInit)
        zygote_pid = zygote.current_pid()
        assert zygote_pid is not None
        assert ppid(sb._proc.pid) == zygote_pid and ppid(zygote_pid) == os.getpid()
        assert ppid(sb.host_pid) == sb._proc.pid
        assert Path(f"/proc/{sb._proc.pid}/cmdline").read_bytes().startswith(b"ares-init\0")
        assert os.readlink(f"/proc/{zygote_pid}/cwd") == "/"
        assert Path(f"/proc/{sb._proc.pid}/environ").read_bytes() == b""


async def test_a_zygote_child_is_a_direct_init_in_all_that_matters(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fds, ids, capabilities, signal state, umask of the outer init and pid 1, and of a command."""
    probe = "ls /proc/self/fd | wc -l; grep -E '^(Sig|Cap|NoNewPrivs|Seccomp)' /proc/self/status"
    host_ignored = int(status(os.getpid())["SigIgn"], 16) & ~(
        1 << (signal.SIGPIPE - 1) | 1 << (signal.SIGXFSZ - 1)
    )

    async def observe() -> tuple[type, dict[str, object]]:
        async with LocalSandbox() as sb:
            inside = (await sb.exec(probe)).stdout
            seen: dict[str, object] = {"inside": inside}
            # pid 1 forks the next command's shepherd after each exec: wait until it has settled.
            settled = [fd_kinds(sb.host_pid)]
            while settled[-1] != (now := await asyncio.sleep(0.1, fd_kinds(sb.host_pid))) or len(settled) < 2:
                settled.append(now)
            for name, pid in (("init", sb._proc.pid), ("pid1", sb.host_pid)):  # type: ignore[union-attr]
                fields = status(pid)
                for key in ("Uid", "Gid"):  # each sandbox has its own host id range
                    fields[key] = " ".join(str(int(i) - sb.host_ids[0]) for i in fields[key].split())
                for key in ("SigIgn", "SigCgt"):  # what the host itself ignores is not ours to reset
                    fields[key] = f"{int(fields[key], 16) & ~host_ignored:016x}"
                seen[name] = fields
                seen[f"{name}_fds"] = fd_kinds(pid)
                seen[f"{name}_environ"] = Path(f"/proc/{pid}/environ").read_bytes()
            return type(sb._proc), seen

    forked_type, forked = await observe()
    monkeypatch.setenv(zygote.ENV_SWITCH, "0")
    direct_type, direct = await observe()
    assert (forked_type, direct_type) == (zygote.ZygoteInit, zygote.DirectInit)
    assert forked == direct


async def test_zygote_is_restarted_after_being_killed_and_takes_its_inits_along() -> None:
    async with LocalSandbox() as first:
        await first.exec("sleep 4242 > /dev/null 2>&1 &")
        old, init, pid1 = zygote.current_pid(), first._proc.pid, first.host_pid  # type: ignore[union-attr]
        assert old is not None
        await kill_zygote()  # waits until the keeper has reaped it: no zombie zygote
        assert await asyncio.to_thread(eventually, lambda: not alive(init) and not alive(pid1))
        with pytest.raises(SandboxCrashedError):
            await first.exec("true")
    async with LocalSandbox() as second:
        assert (await second.exec("echo back")).stdout == "back\n"
        new = zygote.current_pid()
        assert new is not None and new != old
        assert ppid(second._proc.pid) == new  # type: ignore[union-attr]


async def test_zygote_leaves_no_zombies() -> None:
    sandboxes = [LocalSandbox() for _ in range(4)]
    for sb in sandboxes:
        await sb.start()
    zygote_pid = zygote.current_pid()
    assert zygote_pid is not None
    inits = {sb._proc.pid for sb in sandboxes}  # type: ignore[union-attr]
    assert {pid for pid, _ in children(zygote_pid)} >= inits
    os.kill(sandboxes[0].host_pid, signal.SIGKILL)  # one sandbox dies on its own
    for sb in sandboxes:
        await sb.stop()
    assert await asyncio.to_thread(eventually, lambda: not set(inits) & {p for p, _ in children(zygote_pid)})
    assert not [p for p, state in children(zygote_pid) if state == "Z"]


async def test_many_concurrent_starts() -> None:
    sandboxes = [LocalSandbox() for _ in range(24)]
    try:
        await asyncio.gather(*(sb.start() for sb in sandboxes))
        results = await asyncio.gather(*(sb.exec("echo $((6 * 7))") for sb in sandboxes))
        assert [r.stdout for r in results] == ["42\n"] * len(sandboxes)
        zygote_pid = zygote.current_pid()
        assert {ppid(sb._proc.pid) for sb in sandboxes} == {zygote_pid}  # type: ignore[union-attr]
        assert len({sb.host_pid for sb in sandboxes}) == len(sandboxes)
    finally:
        await asyncio.gather(*(sb.stop() for sb in sandboxes))


async def test_zygote_outlives_the_thread_that_first_needed_it() -> None:
    """PR_SET_PDEATHSIG fires when the forking *thread* exits: a sandbox started from a short-lived
    thread's event loop (the thread that caused the zygote's start) must survive that thread."""
    await kill_zygote()
    started: list[LocalSandbox] = []

    def start_in_a_thread() -> None:
        sb = LocalSandbox()
        asyncio.run(sb.start())
        started.append(sb)

    thread = threading.Thread(target=start_in_a_thread)
    thread.start()
    await asyncio.to_thread(thread.join)
    [sb] = started
    try:
        await asyncio.sleep(0.2)
        assert (await sb.exec("echo still here")).stdout == "still here\n"
        assert zygote.current_pid() is not None
    finally:
        await sb.stop()


async def test_disabled_zygote_spawns_inits_directly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(zygote.ENV_SWITCH, "0")
    async with LocalSandbox() as sb:
        assert isinstance(sb._proc, zygote.DirectInit)
        assert ppid(sb._proc.pid) == os.getpid()
        assert (await sb.exec("echo direct")).stdout == "direct\n"


@pytest.mark.parametrize("broken", ["cannot spawn", "exits at once"])
async def test_a_broken_zygote_falls_back_to_the_direct_spawn(
    monkeypatch: pytest.MonkeyPatch, broken: str
) -> None:
    await kill_zygote()
    argv = ["/nonexistent/python"] if broken == "cannot spawn" else [sys.executable, "-c", "pass"]
    monkeypatch.setattr(zygote, "_zygote_argv", lambda host_pid, sock_fd: argv)
    for _ in range(zygote.MAX_FAILURES + 1):  # past the limit the zygote is not even tried
        async with LocalSandbox() as sb:
            assert isinstance(sb._proc, zygote.DirectInit)
            assert (await sb.exec("echo fallback")).stdout == "fallback\n"
    assert zygote._failures == zygote.MAX_FAILURES
    await kill_zygote()


FORKING_HOST = textwrap.dedent(
    """
    import asyncio, json, os
    from ares.sandbox.local import LocalSandbox, zygote

    def ppid(pid):
        return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])

    async def one():
        async with LocalSandbox() as sb:
            out = (await sb.exec("echo ok")).stdout
            z = zygote.current_pid()
            return {"me": os.getpid(), "zygote": z, "zygote_parent": ppid(z),
                    "init_parent": ppid(sb._proc.pid), "out": out}

    before = asyncio.run(one())
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(r)
        os.write(w, json.dumps(asyncio.run(one())).encode())
        os._exit(0)
    os.close(w)
    in_child = json.loads(os.read(r, 1 << 16))
    os.waitpid(child, 0)
    print(json.dumps({"before": before, "child": in_child, "after": asyncio.run(one())}))
    """
)


def test_a_forked_host_starts_its_own_zygote(tmp_path: Path) -> None:
    env = {**os.environ, "ARES_SANDBOX_DIR": str(tmp_path / "state"), "PYTHONPATH": str(SRC)}
    env.pop(zygote.ENV_SWITCH, None)
    proc = subprocess.run(
        [sys.executable, "-c", FORKING_HOST], capture_output=True, text=True, env=env, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    before, child, after = seen["before"], seen["child"], seen["after"]
    for run in (before, child, after):
        assert run["out"] == "ok\n"
        assert run["zygote_parent"] == run["me"] and run["init_parent"] == run["zygote"]
    assert child["me"] != before["me"] and child["zygote"] != before["zygote"]
    assert after["zygote"] == before["zygote"]  # the parent's zygote is untouched by the child's


UNPRIVILEGED = textwrap.dedent(
    """
    import asyncio, json, os
    from ares.sandbox.local import LocalSandbox, zygote

    def ppid(pid):
        return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])

    async def main():
        async with LocalSandbox() as sb:
            r = await sb.exec("id -u; echo hi > /workspace/f && cat /workspace/f")
            return {"uid": os.getuid(), "out": r.stdout.split(), "kind": type(sb._proc).__name__,
                    "init_parent": ppid(sb._proc.pid), "zygote": zygote.current_pid(), "me": os.getpid()}

    print(json.dumps(asyncio.run(main())))
    """
)


@pytest.mark.skipif(not can_drop(), reason=SKIP_REASON)
@pytest.mark.parametrize("use_zygote", [True, False])
def test_unprivileged_host(use_zygote: bool) -> None:
    python = nobody_python() or pytest.skip(SKIP_REASON)
    state = Path(tempfile.mkdtemp(prefix="ares-unpriv-"))
    try:
        os.chown(state, 65534, 65534)
        site = sysconfig.get_paths()["purelib"]
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{SRC}:{site}", "ARES_SANDBOX_DIR": str(state)}
        if not use_zygote:
            env[zygote.ENV_SWITCH] = "0"
        drop = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        result = subprocess.run(
            [*drop, python, "-c", UNPRIVILEGED],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        seen = json.loads(result.stdout)
        assert seen["uid"] == 65534 and seen["out"] == ["0", "hi"]
        if use_zygote:
            assert seen["kind"] == "ZygoteInit" and seen["init_parent"] == seen["zygote"]
        else:
            assert seen["kind"] == "DirectInit" and seen["init_parent"] == seen["me"]
        assert list(state.iterdir()) == []
    finally:
        shutil.rmtree(state, ignore_errors=True)
