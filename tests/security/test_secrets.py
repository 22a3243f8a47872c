"""Secrets: what of the host a sandboxed command can read (environment, files, paths, processes)."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Scenario = Callable[..., dict[str, Any]]
CHECKOUT = Path(__file__).resolve().parents[2]

PROBE = r"""
import ctypes, errno, json, os, sys
args = json.loads(sys.argv[1])
out = {"environ": dict(os.environ)}

def read(path, limit=65536):
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode(errors="replace")
    except OSError as e:
        return None

procs = {}
for entry in os.listdir("/proc"):
    if entry.isdigit():
        procs[entry] = {"environ": read(f"/proc/{entry}/environ"), "cmdline": read(f"/proc/{entry}/cmdline")}
out["procs"] = procs
out["pid1_cmdline"] = read("/proc/1/cmdline")
out["exists"] = {p: os.path.lexists(p) for p in args["host_paths"]}
out["root_entries"] = sorted(os.listdir("/root"))
out["home_entries"] = sorted(os.listdir("/home")) if os.path.isdir("/home") else []
out["etc_private"] = {p: read(p, 4096) for p in args["etc_private"]}
out["mountinfo"] = read("/proc/self/mountinfo", 1 << 20)
out["mounts"] = read("/proc/mounts", 1 << 20)
out["cgroup"] = read("/proc/self/cgroup")
out["cgroup_pid1"] = read("/proc/1/cgroup")
libc = ctypes.CDLL(None, use_errno=True)
shmid = libc.shmget(args["ipc_key"], 0, 0)
out["sysv_shm"] = shmid if shmid >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
out["sysvipc_listing"] = read("/proc/sysvipc/shm")
out["posix_shm"] = os.path.lexists("/dev/shm/" + args["shm_name"])
print(json.dumps(out))
"""

SCENARIO = """
import ctypes, secrets


async def scenario(args):
    host_cgroup = Path("/proc/self/cgroup").read_text()
    # Host IPC objects a sandbox must not reach: a SysV shared memory segment and a POSIX shm file.
    libc = ctypes.CDLL(None, use_errno=True)
    key = 0x41520000 + secrets.randbelow(0xFFFF)
    shmid = libc.shmget(key, 4096, 0o1000 | 0o666)  # IPC_CREAT
    shm_name = "ares-sec-" + secrets.token_hex(6)
    shm_file = Path("/dev/shm", shm_name)
    shm_file.write_text("host")
    argv = {k: args[k] for k in ("host_paths", "etc_private")}
    argv.update(ipc_key=key, shm_name=shm_name)
    try:
        async with LocalSandbox(SandboxSpec()) as sb:
            env = await run(sb, "env")
            shell_env = await run(sb, "set")
            inside = await probe(sb, args["probe"], argv=argv)
    finally:
        if shmid >= 0:
            libc.shmctl(shmid, 0, None)  # IPC_RMID
        shm_file.unlink()
    return {"env": env, "set": shell_env, "inside": inside, "host_cgroup": host_cgroup,
            "ipc_key": key, "host_shmid": shmid}
"""


def _etc_private() -> list[str]:
    """Files in the host's /etc that other users may not read (shadow, private keys, ...)."""
    found: list[str] = []
    for dirpath, _dirnames, filenames in os.walk("/etc"):
        for name in filenames:
            path = os.path.join(dirpath, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and st.st_size and not st.st_mode & stat.S_IROTH:
                found.append(path)
    return sorted({"/etc/shadow", "/etc/gshadow", *found[:40]})


def _host_names(directory: str) -> list[str]:
    try:
        return sorted(os.listdir(directory))
    except OSError:
        return []


@pytest.fixture(scope="module")
def result(scenario: Scenario, host: Any) -> dict[str, Any]:
    host_paths = [str(host.marker), str(host.base), str(host.state), str(CHECKOUT), str(CHECKOUT / "src")]
    args = {"probe": PROBE, "host_paths": host_paths, "etc_private": _etc_private()}
    res = scenario(SCENARIO, args)
    res["host_root_entries"] = _host_names("/root")
    res["host_home_entries"] = _host_names("/home")
    return res


def _inside(result: dict[str, Any]) -> dict[str, Any]:
    data = result["inside"]["data"]
    assert data is not None, result["inside"]["exec"]
    return data


def test_host_environment_does_not_leak(result: dict[str, Any], host: Any) -> None:
    """Attack: read the host's environment (API keys, tokens) from `env`, `set`, os.environ, or the
    environ of any process in the sandbox including pid 1 (/proc/1/environ). Expected: the value of
    $ARES_TEST_SECRET, set in the host process that runs ARES, appears in none of them."""
    assert host.secret not in result["env"].get("stdout", ""), "the host's secret is in `env`"
    assert host.secret not in result["set"].get("stdout", ""), "the host's secret is in `set`"
    data = _inside(result)
    assert host.secret not in repr(data["environ"])
    for pid, info in data["procs"].items():
        assert host.secret not in (info["environ"] or ""), f"the host's secret is in /proc/{pid}/environ"


def test_host_checkout_and_state_paths_are_invisible(result: dict[str, Any]) -> None:
    """Attack: read the host's checkout (source, .env files, credentials), ARES's state dir or a
    host-only file by their host paths. Expected: none of these paths exists in the sandbox."""
    exists = _inside(result)["exists"]
    assert not any(exists.values()), {p: e for p, e in exists.items() if e}


def test_host_home_dirs_are_invisible(result: dict[str, Any]) -> None:
    """Attack: loot the host's /root and /home (ssh keys, cloud credentials, shell history).
    Expected: no entry of the host's /root or /home appears in the sandbox's."""
    data = _inside(result)
    assert not set(result["host_root_entries"]) & set(data["root_entries"]), data["root_entries"]
    assert not set(result["host_home_entries"]) & set(data["home_entries"]), data["home_entries"]


def test_private_etc_files_are_masked(result: dict[str, Any]) -> None:
    """Attack: read /etc/shadow, /etc/gshadow and every other /etc file the host keeps from other users
    (ssh host keys, ...). Expected: each is empty or unreadable in the sandbox."""
    for path, content in _inside(result)["etc_private"].items():
        assert not content, f"{path} is readable in the sandbox ({len(content)} chars)"


def test_pid1_cmdline_reveals_no_host_path(result: dict[str, Any], host: Any) -> None:
    """Attack: learn host paths (checkout, interpreter, ARES's init script) from /proc/1/cmdline, as a
    map for other attacks. Expected: pid 1's command line names neither the checkout nor
    "_init.py" nor the state dir."""
    cmdline = _inside(result)["pid1_cmdline"] or ""
    assert str(CHECKOUT) not in cmdline, cmdline
    assert "_init.py" not in cmdline, cmdline
    assert str(host.base) not in cmdline, cmdline


@pytest.mark.parametrize("source", ["mountinfo", "mounts"])
def test_mount_table_reveals_no_host_path(result: dict[str, Any], host: Any, source: str) -> None:
    """Attack: read the overlay's lowerdir/upperdir/workdir host paths from /proc/self/mountinfo or
    /proc/mounts (they tell where the sandbox's files live on the host, and the uid of its user).
    Expected: neither the state dir (ARES_SANDBOX_DIR), nor "/tmp/ares-", nor the checkout appears."""
    text = _inside(result)[source] or ""
    for needle in (str(host.state), str(host.base), "/tmp/ares-", str(CHECKOUT)):
        assert needle not in text, f"{needle!r} in /proc/self/{source}"


def test_cgroup_paths_reveal_nothing_of_the_host(result: dict[str, Any]) -> None:
    """Attack: read the host's cgroup layout (service names, container ids, ARES's own cgroup) from
    /proc/self/cgroup. Expected: none of the host process's own non-root cgroup paths appears in
    the sandbox's /proc/self/cgroup or /proc/1/cgroup (a cgroup namespace shows "/")."""
    host_paths = {
        line.split(":", 2)[2] for line in result["host_cgroup"].splitlines() if line.count(":") >= 2
    } - {"/"}
    data = _inside(result)
    for source in ("cgroup", "cgroup_pid1"):
        text = data[source] or ""
        for path in host_paths:
            assert path not in text, f"host cgroup {path!r} visible in the sandbox's {source}"


def test_host_processes_are_invisible(result: dict[str, Any], host: Any) -> None:
    """Attack: list the host's processes (their command lines and environments hold secrets and
    targets). Expected: no process visible in the sandbox is the host process running ARES (its
    command line carries a marker) and no visible pid is outside the sandbox's few processes."""
    procs = _inside(result)["procs"]
    marker = f"ares-sec-host-{host.base.name}"
    assert not [pid for pid, info in procs.items() if marker in (info["cmdline"] or "")]
    assert len(procs) < 20, f"{len(procs)} processes visible: the host's pid namespace?"


def test_host_ipc_objects_are_invisible(result: dict[str, Any]) -> None:
    """Attack: attach the host's SysV shared memory (databases and browsers keep data there) or open
    its POSIX shm files in /dev/shm. Expected: shmget of a segment the host created fails (ENOENT:
    own IPC namespace), /proc/sysvipc/shm does not list it, and the host's /dev/shm file is absent."""
    assert result["host_shmid"] >= 0, "the host could not create its test segment"
    data = _inside(result)
    assert data["sysv_shm"] == "ENOENT", data["sysv_shm"]
    key = str(result["ipc_key"])
    assert not any(line.split()[:1] == [key] for line in (data["sysvipc_listing"] or "").splitlines())
    assert data["posix_shm"] is False
