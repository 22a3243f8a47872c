"""Host identity: who the sandbox's processes are on the host, and what the sandbox says it is."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

Scenario = Callable[..., dict[str, Any]]
NOBODY = 65534

MARKER_SLEEP = "sleep 4242.5"

PROBE = r"""
import ctypes, json, os, socket
out = {"resuid": os.getresuid(), "resgid": os.getresgid()}
out["uid_map"] = open("/proc/self/uid_map").read()
out["gid_map"] = open("/proc/self/gid_map").read()
out["hostname"] = socket.gethostname()
libc = ctypes.CDLL(None, use_errno=True)
name = b"ares-evil"
ret = libc.sethostname(name, len(name))
out["sethostname"] = [ret, ctypes.get_errno()]
out["hostname_after"] = socket.gethostname()
root = [line.split() for line in open("/proc/self/mountinfo") if line.split()[4] == "/"]
out["root_fstype"] = root[-1][root[-1].index("-") + 1] if root else None
print(json.dumps(out))
"""

# What a second sandbox, running at the same time, can see of the first one.
NEIGHBOUR_PROBE = r"""
import json, os
seen = []
for pid in (p for p in os.listdir("/proc") if p.isdigit()):
    try:
        if open(f"/proc/{pid}/cmdline", "rb").read().startswith(b"sleep\x004242.5"):
            seen.append(pid)
    except OSError:
        pass
out = {"marker_processes": seen, "marker_file": os.path.exists("/tmp/first-sandbox-was-here")}
out["uid_map"] = open("/proc/self/uid_map").read()
print(json.dumps(out))
"""

SCENARIO = """
async def scenario(args):
    async with LocalSandbox(SandboxSpec()) as sb, LocalSandbox(SandboxSpec()) as other:
        started = await run(sb, "touch /tmp/first-sandbox-was-here; sleep 4242.5 > /dev/null 2>&1 &")
        await asyncio.sleep(0.2)
        seen = host_processes()
        inside = await probe(sb, args["probe"])
        neighbour = await probe(other, args["neighbour"])
        hostname_cmd = await run(sb, "hostname ares-evil2; hostname")
    return {"started": started, "host": seen, "inside": inside, "neighbour": neighbour,
            "hostname_cmd": hostname_cmd}
"""


@pytest.fixture(scope="module")
def result(scenario: Scenario) -> dict[str, Any]:
    return scenario(SCENARIO, {"probe": PROBE, "neighbour": NEIGHBOUR_PROBE})


def _inside(result: dict[str, Any]) -> dict[str, Any]:
    data = result["inside"]["data"]
    assert data is not None, result["inside"]["exec"]
    return data


def _map_lines(text: str) -> list[tuple[int, int, int]]:
    return [(int(a), int(b), int(c)) for a, b, c in (line.split() for line in text.splitlines())]


@pytest.mark.parametrize("kind", ["uid_map", "gid_map"])
def test_root_inside_is_not_root_outside(result: dict[str, Any], who: str, kind: str) -> None:
    """Attack: sandbox root is host root (an identity map), so any kernel bug or missed check hands the
    agent the host. Expected: the first map line maps 0 to a non-zero host id (nobody: 65534) and no
    line covers host id 0."""
    lines = _map_lines(_inside(result)[kind])
    inside, outside, _count = lines[0]
    assert inside == 0
    assert outside != 0, f"sandbox root is host root: {lines}"
    assert not any(out <= 0 < out + count for _in, out, count in lines), lines
    if who == "nobody":
        assert outside == NOBODY


def test_commands_run_as_root_of_the_sandbox(result: dict[str, Any]) -> None:
    """Not an attack, the baseline: commands are uid/gid 0 inside (tools expect root), so the other
    identity tests are about the host's view of that root."""
    data = _inside(result)
    assert data["resuid"] == [0, 0, 0]
    assert data["resgid"] == [0, 0, 0]


def test_sandbox_processes_never_run_as_host_root(result: dict[str, Any], who: str) -> None:
    """Attack: a process left running by the agent (here `sleep 4242.5 &`) is a host-root process
    that host tools, signals and /proc trust. Expected: seen from the host, every process in the
    sandbox's pid namespace (the marker, pid 1, the ARES helpers) has non-zero real, effective, saved
    and fs uids and gids (nobody: all 65534)."""
    assert result["started"].get("exit_code") == 0, result["started"]
    sandboxed = [p for p in result["host"] if len(p["nspid"]) > 1]
    assert any(p["cmdline"] == MARKER_SLEEP for p in sandboxed), "marker process not found on the host"
    for proc in sandboxed:
        assert 0 not in proc["uid"] and 0 not in proc["gid"], f"host root in the sandbox: {proc}"
        if who == "nobody":
            assert set(proc["uid"]) == {NOBODY}, proc


def test_hostname_is_sandbox_and_cannot_be_changed(result: dict[str, Any]) -> None:
    """Attack: sethostname(2) / `hostname x` to confuse host logs or other tenants (needs CAP_SYS_ADMIN
    over the uts namespace). Expected: the hostname is "sandbox", sethostname returns -1, and
    `hostname ares-evil2` fails leaving it unchanged."""
    data = _inside(result)
    assert data["hostname"] == "sandbox"
    assert data["sethostname"][0] == -1
    assert data["hostname_after"] == "sandbox"
    cmd = result["hostname_cmd"]
    assert cmd.get("stdout", "").strip().splitlines()[-1:] == ["sandbox"], cmd


def test_root_filesystem_is_an_overlay(result: dict[str, Any]) -> None:
    """Attack surface check: the sandbox's / must be its own overlay (writes land in the sandbox's
    upper dir), never a bind of a host directory. Expected: mountinfo shows / as overlay."""
    assert _inside(result)["root_fstype"] == "overlay"


def test_concurrent_sandboxes_are_isolated_from_each_other(result: dict[str, Any], who: str) -> None:
    """Attack: reach another tenant: see or signal the processes of a sandbox running at the same time,
    read its files. Expected: the second sandbox sees neither the first one's marker process nor its
    /tmp file; when ARES runs as root, the two sandboxes' host id ranges do not overlap (an escape
    from one does not own the other's processes and files)."""
    neighbour = result["neighbour"]["data"]
    assert neighbour is not None, result["neighbour"]["exec"]
    assert neighbour["marker_processes"] == [], neighbour
    assert neighbour["marker_file"] is False
    if who == "root":
        (_, first, first_count), *_ = _map_lines(_inside(result)["uid_map"])
        (_, second, second_count), *_ = _map_lines(neighbour["uid_map"])
        assert first + first_count <= second or second + second_count <= first, (first, second)
