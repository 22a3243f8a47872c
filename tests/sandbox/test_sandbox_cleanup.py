"""Sandboxes never outlive the interpreter, and the sandbox also runs for unprivileged users."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ares.sandbox.local import janitor
from interruptible import popen_interruptible
from nobody_python import SKIP_REASON, can_drop, nobody_python

SRC = Path(__file__).resolve().parents[2] / "src"

CHILD = textwrap.dedent(
    """
    import asyncio, sys, time
    from ares.sandbox.local import LocalSandbox

    async def main():
        sb = LocalSandbox()
        await sb.start()
        await sb.exec("sleep 7777 > /dev/null 2>&1 &")
        print(sb.diff_dir.parent, flush=True)
        if sys.argv[1] == "wait":
            await asyncio.sleep(60)

    asyncio.run(main())
    """
)


def sleepers() -> list[str]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if b"sleep\x007777" in Path(f"/proc/{entry}/cmdline").read_bytes():
                    out.append(entry)
            except OSError:
                pass
    return out


def wait_for(condition: Callable[[], object], timeout_s: float = 30.0) -> None:
    """Poll until ``condition()`` holds: a background ``sleep`` starts a little after exec returns."""
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[str]]]:
    """Child hosts started by a test, killed after it even when it fails (or they would outlive it)."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for child in started:
        if child.poll() is None:
            child.kill()
            child.wait(30)


def run_child(mode: str, tmp_path: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "ARES_SANDBOX_DIR": str(tmp_path / "state"), "PYTHONPATH": str(SRC)}
    return popen_interruptible(
        [sys.executable, "-c", CHILD, mode], stdout=subprocess.PIPE, text=True, env=env
    )


def test_interpreter_exit_without_stop_cleans_up(
    tmp_path: Path, children: list[subprocess.Popen[str]]
) -> None:
    child = run_child("exit", tmp_path)
    children.append(child)
    state_dir = Path(child.stdout.readline().strip())  # type: ignore[union-attr]
    assert child.wait(30) == 0
    assert not state_dir.exists()
    wait_for(lambda: not sleepers())
    assert sleepers() == []
    assert list((tmp_path / "state").iterdir()) == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signals_clean_up(tmp_path: Path, sig: signal.Signals, children: list[subprocess.Popen[str]]) -> None:
    child = run_child("wait", tmp_path)
    children.append(child)
    state_dir = Path(child.stdout.readline().strip())  # type: ignore[union-attr]
    wait_for(sleepers)
    assert state_dir.exists() and sleepers()
    child.send_signal(sig)
    child.wait(30)
    assert not state_dir.exists()
    wait_for(lambda: not sleepers())
    assert sleepers() == []


def test_sigkill_of_the_host_kills_the_sandbox(tmp_path: Path, children: list[subprocess.Popen[str]]) -> None:
    child = run_child("wait", tmp_path)
    children.append(child)
    child.stdout.readline()  # type: ignore[union-attr]
    wait_for(sleepers)
    child.kill()
    child.wait(30)
    wait_for(lambda: not sleepers())
    assert sleepers() == []
    # What only a live host can undo (the disk limit's tmpfs, the cgroups) is swept by the next one.
    janitor.sweep_stale(tmp_path / "state")
    assert list((tmp_path / "state").iterdir()) == []


UNPRIVILEGED = textwrap.dedent(
    """
    import asyncio, os
    from ares.sandbox.local import LocalSandbox

    async def main():
        async with LocalSandbox() as sb:
            r = await sb.exec("id -u; echo hi > /workspace/f && cat /workspace/f; ls /root | wc -l")
            print(os.getuid(), r.stdout.split(), r.exit_code)

    asyncio.run(main())
    """
)


@pytest.mark.skipif(not can_drop(), reason=SKIP_REASON)
def test_runs_unprivileged_with_user_namespaces() -> None:
    python = nobody_python() or pytest.skip(SKIP_REASON)
    state = Path(tempfile.mkdtemp(prefix="ares-unpriv-"))
    os.chown(state, 65534, 65534)
    site = sysconfig.get_paths()["purelib"]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{SRC}:{site}", "ARES_SANDBOX_DIR": str(state)}
    drop = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    cmd = [*drop, python, "-c", UNPRIVILEGED]
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    leftovers = list(state.iterdir())
    shutil.rmtree(state)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["65534", "['0',", "'hi',", "'0']", "0"]
    assert leftovers == []
