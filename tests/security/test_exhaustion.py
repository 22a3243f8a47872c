"""Exhaustion: a command that eats processes, memory, output, shared memory or disk, with no Resources
set. Each must be stopped by the sandbox's default limits, and the sandbox must answer afterwards.

The host is protected first: an attack is only run when ``LocalSandbox.limits`` reports the limit it
needs as enforced (a fork bomb, a 64 GiB allocation or a 100 GB file without a limit would hit the
whole machine). An attack not run fails its test, with the reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

Scenario = Callable[..., dict[str, Any]]
MAX_OUTPUT = 16 * 1024 * 1024
NO_SPACE = "No space left on device"

FORK_BOMB = ":(){ :|:& };:"
# A bomb that stays in the foreground: every process forks for ever.
FORK_LOOP = (
    "python3 -c 'import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass'"
)
# Reserves 64 GiB in 1 GiB chunks (address space only), then touches every page of the first {gib}.
# {gib} is 64 capped by the host's available memory, so that a missing limit fails the test, not the
# host. Reserving all 64 first makes an address-space limit (RLIMIT_AS, 16 GiB by default) refuse at
# once, whatever the host's free memory (touching only {gib} GiB would fit under it on a host with
# less than about 19 GiB free).
MEMORY_HOG = (
    "python3 -c 'import mmap\nchunks = []\n"
    "for _ in range(64):\n    chunks.append(mmap.mmap(-1, 1 << 30, mmap.MAP_PRIVATE))\n"
    'for c in chunks[:{gib}]:\n    c[::4096] = b"\\x01" * (len(c) // 4096)\nprint("survived")\''
)
OUTPUT_FLOOD = "head -c 300000000 /dev/zero | tr '\\0' a"
# Leaves a writer on the command's stdout: 100 MB, then a marker sleep that keeps the fd open.
BACKGROUND_FLOOD = "(head -c 100000000 /dev/zero; exec sleep 4243.5) > /dev/stdout 2>&1 &"
# {mb}: 100 GB, capped by half the host's free memory and disk (tmpfs pages are memory).
SHM_FILL = "dd if=/dev/zero of=/dev/shm/fill bs=1M count={mb}"
DISK_FILL = "dd if=/dev/zero of=/root/big bs=1M count={mb}"

# After the background flood returned: how big is what the leftover writer writes into?
FLOOD_PROBE = r"""
import json, os, stat, time
deadline = time.monotonic() + 5
sizes = {}
while time.monotonic() < deadline:
    writers = {}
    for pid in (p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read()
            if cmd.startswith(b"head\0") or cmd.startswith(b"sleep\x004243.5"):
                writers[pid] = (cmd.split(b"\0")[0].decode(), os.stat(f"/proc/{pid}/fd/1"))
        except OSError:
            continue
    sizes = {pid: {"cmd": c, "regular": stat.S_ISREG(st.st_mode), "size": st.st_size}
             for pid, (c, st) in writers.items()}
    if not any(c == "head" for c, _ in writers.values()):
        break
    time.sleep(0.2)
print(json.dumps({"writers": sizes}))
"""

# Every attack gets a fresh sandbox, so that one attack's leftovers cannot fail the next one.
SCENARIO = """
def enforced(sb, name):
    return any(n == name and e.mechanism != "unenforced" for n, e in sb.limits.items())


async def alive(sb):
    return await run(sb, "echo alive", timeout_s=20, guard_s=40)


async def attack(cmd, timeout_s, needs=None, after=None, settle_s=2.0):
    async with LocalSandbox(SandboxSpec()) as sb:
        limits = {name: [e.mechanism, e.reason] for name, e in sb.limits.items()}
        if needs is not None and not enforced(sb, needs):
            return {"not_run": f"no enforced default {needs} limit", "limits": limits}
        res = await run(sb, cmd, timeout_s=timeout_s, guard_s=timeout_s + 40)
        if after is not None:
            res["probe"] = await probe(sb, after, timeout_s=30)
        res["after"] = await alive(sb)
        await asyncio.sleep(settle_s)
        res["later"] = await alive(sb)
        res["running"] = sb.running
        res["limits"] = limits
        return res


def host_room_mb(path):
    meminfo = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    available = int(meminfo["MemAvailable"].split()[0]) // 1024
    st = os.statvfs(path)
    return available, st.f_bavail * st.f_frsize // (1 << 20)


async def scenario(args):
    cmds = args["cmds"]
    mem_mb, disk_mb = host_room_mb(Path(args["state"]).parent)
    fill_mb = min(100_000, mem_mb // 2, disk_mb // 2)
    gib = max(1, min(64, (mem_mb - 3072) // 1024))
    out = {"host_room_mb": {"memory": mem_mb, "disk": disk_mb, "fill": fill_mb, "hog_gib": gib}}
    async with LocalSandbox(SandboxSpec()) as sb:
        out["limits"] = {name: [e.mechanism, e.reason] for name, e in sb.limits.items()}
    out["fork_bomb"] = await attack(cmds["fork_bomb"], 5, needs="pids")
    out["fork_loop"] = await attack(cmds["fork_loop"], 2, needs="pids")
    out["memory_hog"] = await attack(cmds["memory_hog"].format(gib=gib), 60, needs="memory", settle_s=0)
    out["output_flood"] = await attack(cmds["output_flood"], 60, settle_s=0)
    out["background_flood"] = await attack(cmds["background_flood"], 30, after=args["flood_probe"])
    out["shm_fill"] = await attack(cmds["shm_fill"].format(mb=fill_mb), 60, settle_s=0)
    out["disk_fill"] = await attack(cmds["disk_fill"].format(mb=fill_mb), 180, needs="storage", settle_s=0)
    return out
"""

CMDS = {
    "fork_bomb": FORK_BOMB,
    "fork_loop": FORK_LOOP,
    "memory_hog": MEMORY_HOG,
    "output_flood": OUTPUT_FLOOD,
    "background_flood": BACKGROUND_FLOOD,
    "shm_fill": SHM_FILL,
    "disk_fill": DISK_FILL,
}


@pytest.fixture(scope="module")
def result(scenario: Scenario) -> dict[str, Any]:
    return scenario(SCENARIO, {"cmds": CMDS, "flood_probe": FLOOD_PROBE}, timeout=600)


def _ran(result: dict[str, Any], key: str) -> dict[str, Any]:
    res: dict[str, Any] = result[key]
    assert "not_run" not in res, f"{key} not run, to protect the host: {res['not_run']} ({res['limits']})"
    assert "raised" not in res, f"{key}: exec raised instead of returning a result: {res['raised']}"
    return res


def _alive_after(res: dict[str, Any]) -> None:
    """The same sandbox answers `echo alive` right after the attack and again a few seconds later."""
    for when in ("after", "later"):
        answer = res[when]
        assert answer.get("exit_code") == 0 and answer.get("stdout", "").strip() == "alive", (
            f"the sandbox did not answer `echo alive` {when} the attack: {answer}"
        )
    assert res["running"] is True


@pytest.mark.parametrize("name", ["memory", "pids", "storage"])
def test_default_limits_are_always_on(result: dict[str, Any], name: str) -> None:
    """Attack surface: a task that sets no Resources must not get an unlimited sandbox. Expected:
    ``LocalSandbox.limits`` has an enforced (not "unenforced") entry for memory, pids and storage."""
    limits = result["limits"]
    assert name in limits, f"no default {name} limit: {limits}"
    assert limits[name][0] != "unenforced", limits[name]


def test_fork_bomb_is_contained(result: dict[str, Any]) -> None:
    """Attack: the bash fork bomb `:(){ :|:& };:` with no Resources set (timeout 5 s). It backgrounds
    itself: the command's shell returns at once (exit 0) while the bomb goes on in the background,
    holding every process slot the sandbox has. Expected: the exec returns a result, the bomb stays
    inside the sandbox's pids limit, and the sandbox keeps answering: each later command either runs
    or is refused as a failed run with limit_hit "pids" (no slot to spawn it), never an exception."""
    res = _ran(result, "fork_bomb")
    assert not res["timed_out"] or res["limit_hit"] in (None, "pids"), res
    for when in ("after", "later"):
        answer = res[when]
        assert "raised" not in answer, answer
        refused = answer.get("exit_code") == 126 and answer.get("limit_hit") == "pids"
        assert refused or answer.get("stdout", "").strip() == "alive", answer
    assert res["running"] is True


def test_foreground_fork_loop_is_killed_with_its_tree(result: dict[str, Any]) -> None:
    """Attack: a fork loop that stays in the foreground (every process forks for ever; Python
    os.fork) with no Resources set, timeout 2 s. Expected: timed_out or limit_hit "pids", and the whole
    tree is gone with the command: `echo alive` works right after and 2 s later."""
    res = _ran(result, "fork_loop")
    assert res["timed_out"] or res["limit_hit"] == "pids", res
    _alive_after(res)


def test_memory_hog_is_killed(result: dict[str, Any], who: str) -> None:
    """Attack: allocate 64 GiB in 1 GiB chunks and touch every page, with no Resources set (capped at the
    host's available memory minus 3 GiB, so a missing limit fails the test instead of the host).
    Expected: the command is stopped (never prints "survived", exit code != 0, no timeout), with
    limit_hit "memory" when ARES runs as root (memory cgroup); the sandbox answers afterwards."""
    res = _ran(result, "memory_hog")
    assert "survived" not in res["stdout"], f"no memory limit below {result['host_room_mb']}: {res}"
    assert res["exit_code"] != 0 and not res["timed_out"], res
    if who == "root":
        assert res["limit_hit"] == "memory", res
    _alive_after(res)


def test_output_flood_is_bounded(result: dict[str, Any]) -> None:
    """Attack: print 300 MB (`head -c 300000000 /dev/zero | tr '\\0' a`) to exhaust the host's memory
    through the captured output. Expected: the ExecResult's stdout is at most 16 MiB, limit_hit is
    "output", and the sandbox answers afterwards."""
    res = _ran(result, "output_flood")
    assert res["stdout_len"] <= MAX_OUTPUT, res["stdout_len"]
    assert res["limit_hit"] == "output", {k: v for k, v in res.items() if k != "stdout"}
    _alive_after(res)


def test_background_output_flood_is_bounded(result: dict[str, Any]) -> None:
    """Attack: leave a writer on the command's stdout after it returns (`(head -c 100000000 /dev/zero;
    sleep) > /dev/stdout &`), so the sandbox keeps buffering output no one reads. Expected: the exec
    returns promptly (not blocked by the writer), what the writer writes into never holds more
    than 16 MiB, and later commands still answer."""
    res = _ran(result, "background_flood")
    assert not res["timed_out"] and res["duration_s"] < 10, res
    data = res["probe"]["data"]
    assert data is not None, res["probe"]["exec"]
    for pid, writer in data["writers"].items():
        assert not (writer["regular"] and writer["size"] > MAX_OUTPUT + (1 << 20)), (
            f"pid {pid} ({writer['cmd']}) filled {writer['size']} bytes of buffered output"
        )
    _alive_after(res)


def test_shm_fill_fails_with_no_space(result: dict[str, Any]) -> None:
    """Attack: fill /dev/shm (tmpfs pages are memory, host memory if unbounded) with a 100 GB dd
    (capped at half the host's free memory and disk). Expected: dd fails with "No space left on
    device" before its timeout, and the sandbox answers afterwards."""
    res = _ran(result, "shm_fill")
    assert res["exit_code"] != 0 and not res["timed_out"], res
    assert NO_SPACE in res["stderr"], res
    _alive_after(res)


def test_disk_fill_stops_at_the_storage_limit(result: dict[str, Any], who: str) -> None:
    """Attack: write a 100 GB file (`dd ... of=/root/big`, capped at half the host's free memory and
    disk) to fill the host's disk. Expected: dd stops with an error (no space / file too large) before
    its timeout, limit_hit "disk" when ARES runs as root, and the sandbox answers afterwards. The
    timeout (180 s) is a guard, not a speed bound: unprivileged, the limit is RLIMIT_FSIZE (4 GiB on
    the host's disk), and a loaded CI disk once took over 20 s to take them."""
    res = _ran(result, "disk_fill")
    assert res["exit_code"] != 0 and not res["timed_out"], res
    if who == "root":
        assert res["limit_hit"] == "disk", res
    _alive_after(res)
