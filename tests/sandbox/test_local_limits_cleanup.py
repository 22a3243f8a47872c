"""Limits leave nothing behind when the host dies, and fall back to rlimits for unprivileged users."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
from pathlib import Path

import pytest

from ares.sandbox.local import janitor
from nobody_python import SKIP_REASON, can_drop, nobody_python

SRC = Path(__file__).resolve().parents[2] / "src"
CGROUPS = {"cgroup-v1", "cgroup-v2"}

# Starts a sandbox with every limit, prints its dir and cgroup dirs as JSON, then waits to be killed.
CHILD = textwrap.dedent(
    """
    import asyncio, json
    from pathlib import Path
    from ares.sandbox import Resources, SandboxSpec
    from ares.sandbox.local import LocalSandbox

    async def main():
        spec = SandboxSpec(resources=Resources(memory_mb=128, pids=64, cpus=1, storage_mb=16))
        sb = LocalSandbox(spec)
        await sb.start()
        await sb.exec("sleep 600 > /dev/null 2>&1 &")
        lines = Path(f"/proc/{sb.host_pid}/cgroup").read_text().splitlines()
        cgroups = [
            str(Path("/sys/fs/cgroup", c) / path.lstrip("/"))
            for _, controllers, path in (line.split(":", 2) for line in lines)
            for c in controllers.split(",") if c in ("memory", "pids", "cpu")
        ]
        mechanisms = {name: e.mechanism for name, e in sb.limits.items()}
        info = {"dir": str(sb.diff_dir.parent), "cgroups": cgroups, "limits": mechanisms}
        print(json.dumps(info), flush=True)
        await asyncio.sleep(60)

    asyncio.run(main())
    """
)


def mounted_under(path: Path) -> list[str]:
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f]
    return [p for p in points if p == str(path) or p.startswith(f"{path}/")]


def start_child(state: Path) -> tuple[subprocess.Popen[str], dict[str, object]]:
    env = {**os.environ, "ARES_SANDBOX_DIR": str(state), "PYTHONPATH": str(SRC)}
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True, env=env)
    info = json.loads(child.stdout.readline())  # type: ignore[union-attr]
    limits = info["limits"]
    if limits["storage"] != "tmpfs" or {limits["memory"], limits["pids"], limits["cpus"]} - CGROUPS:
        child.kill()
        child.wait()
        pytest.skip(f"this machine does not enforce every limit with cgroups and a tmpfs: {limits}")
    return child, info


def test_sigterm_of_the_host_removes_cgroups_and_tmpfs(tmp_path: Path) -> None:
    child, info = start_child(tmp_path / "state")
    sandbox_dir, cgroups = Path(str(info["dir"])), [Path(p) for p in info["cgroups"]]  # type: ignore[attr-defined]
    assert len(cgroups) == 3 and all(p.is_dir() for p in cgroups) and mounted_under(sandbox_dir)
    child.send_signal(signal.SIGTERM)
    child.wait(30)
    assert [p for p in cgroups if p.exists()] == []
    assert mounted_under(sandbox_dir) == [] and not sandbox_dir.exists()


def test_sweep_removes_what_a_sigkilled_host_left(tmp_path: Path) -> None:
    state = tmp_path / "state"
    child, info = start_child(state)
    sandbox_dir, cgroups = Path(str(info["dir"])), [Path(p) for p in info["cgroups"]]  # type: ignore[attr-defined]
    child.kill()
    child.wait(30)
    assert mounted_under(sandbox_dir) and all(p.is_dir() for p in cgroups)  # nobody cleaned up
    janitor.sweep_stale(state)
    assert [p for p in cgroups if p.exists()] == []
    assert mounted_under(sandbox_dir) == [] and list(state.iterdir()) == []


UNPRIVILEGED = textwrap.dedent(
    """
    import asyncio, json
    from ares.sandbox import Resources, SandboxSpec
    from ares.sandbox.local import LocalSandbox

    BOMB = '''python3 -c '
    import os
    r, w = os.pipe()
    children = []
    try:
        for _ in range(1000):
            pid = os.fork()
            if pid == 0:
                os.close(w)
                os.read(r, 1)
                os._exit(0)
            children.append(pid)
    finally:  # reap them all, then let the traceback of the refused fork out
        os.close(w)
        for pid in children:
            os.waitpid(pid, 0)
    ' '''

    async def main():
        spec = SandboxSpec(resources=Resources(memory_mb=512, pids=16, storage_mb=4))
        async with LocalSandbox(spec) as sb:
            bomb = await sb.exec(BOMB, timeout_s=60)
            big = await sb.exec("head -c 8M /dev/zero > big", timeout_s=60)
            mechanisms = {name: e.mechanism for name, e in sb.limits.items()}
            print(json.dumps({"limits": mechanisms, "bomb": bomb.limit_hit, "big": big.limit_hit}))

    asyncio.run(main())
    """
)


@pytest.mark.skipif(not can_drop(), reason=SKIP_REASON)
def test_unprivileged_sandboxes_fall_back_to_rlimits() -> None:
    python = nobody_python() or pytest.skip(SKIP_REASON)
    state = Path(tempfile.mkdtemp(prefix="ares-unpriv-limits-"))
    os.chown(state, 65534, 65534)
    site = sysconfig.get_paths()["purelib"]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{SRC}:{site}", "ARES_SANDBOX_DIR": str(state)}
    drop = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    result = subprocess.run(
        [*drop, python, "-c", UNPRIVILEGED], capture_output=True, text=True, env=env, timeout=120
    )
    leftovers = list(state.iterdir())
    shutil.rmtree(state)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "limits": {"memory": "rlimit", "pids": "rlimit", "storage": "rlimit"},
        "bomb": "pids",
        "big": "disk",
    }
    assert leftovers == []
