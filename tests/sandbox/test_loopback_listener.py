"""``LocalSandbox.listen_loopback``: the host serves a port that exists only in the sandbox's network.

The hostile checks run in loopback_scenario.py (a script), once as root (sandbox root mapped to an
unprivileged host id range) and once as an unprivileged host user (nobody, via setpriv; a suite not
run as root runs that mode as itself). Each mode's report is computed once and shared by the tests.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

import pytest

from ares.errors import SandboxError
from ares.sandbox.capabilities import Capability
from ares.sandbox.cloud.base import CloudSandbox
from ares.sandbox.local import LocalSandbox, loopback, network
from nobody_python import DROP, SKIP_REASON, nobody_python

SRC = Path(__file__).resolve().parents[2] / "src"
SCENARIO = Path(__file__).with_name("loopback_scenario.py")
NOBODY = 65534
MODES = ["root", "unprivileged"]
ANSWER = "hello from the host: GET /v1/models HTTP/1.1"

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux namespaces only")


@functools.cache
def report(mode: str) -> dict[str, Any]:
    """The scenario's report, run as root or as an unprivileged user (state dir of its own)."""
    env = {"PATH": network.SEARCH_PATH, "PYTHONPATH": str(SRC), "LANG": "C.UTF-8"}
    cmd = [sys.executable, str(SCENARIO)]
    if mode == "root" and os.geteuid() != 0:
        pytest.skip("needs root")
    if mode == "unprivileged" and os.geteuid() == 0:
        python = nobody_python() or pytest.skip(SKIP_REASON)
        env["PYTHONPATH"] += ":" + sysconfig.get_paths()["purelib"]
        cmd = [*DROP, python, str(SCENARIO)]
    state = Path(tempfile.mkdtemp(prefix="ares-loopback-"))
    try:
        if mode == "unprivileged" and os.geteuid() == 0:
            os.chown(state, NOBODY, NOBODY)
        env["ARES_SANDBOX_DIR"] = str(state / "sandboxes")
        result = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=state, timeout=120)
        assert result.returncode == 0, result.stderr[-4000:]
        seen: dict[str, Any] = json.loads(result.stdout)
        seen["state_left"] = [p.name for p in (state / "sandboxes").glob("*")]
        return seen
    finally:
        shutil.rmtree(state, ignore_errors=True)


@pytest.mark.parametrize("mode", MODES)
def test_the_host_serves_commands_inside_the_sandbox(mode: str) -> None:
    r = report(mode)
    assert (r["uid"] == 0) == (mode == "root")
    assert r["is_listener"]
    host, port = r["listener"]["port"]
    assert host == "127.0.0.1" and not r["listener"]["blocking"]
    # Port 0 picks a free one each time, concurrently too.
    assert r["listener"]["more_count"] == len(r["listener"]["more_ports"]) == 3
    assert port not in r["listener"]["more_ports"]
    assert r["root"]["uid"] == 0 and r["root"]["answer"] == ANSWER
    # An unprivileged user inside (root-run: uid 65534; unprivileged: only root is mapped, so root
    # without a single capability) reaches it just the same.
    assert r["user"]["answer"] == ANSWER
    if mode == "root":
        assert r["user"]["uid"] == NOBODY
    else:
        assert r["user"]["uid"] == 0 and r["user"]["caps"] == "0000000000000000"
    assert r["seen"] == ["GET /v1/models HTTP/1.1"] * (3 if "online" in r else 2)


@pytest.mark.parametrize("mode", MODES)
def test_nothing_else_is_reachable_from_inside(mode: str) -> None:
    """With the network off: the host's services on 127.0.0.1, ::1 and 0.0.0.0 (through every host
    address) stay unreachable while the listener works; the sandbox has only lo and no route."""
    r = report(mode)
    for who in ("root", "user", "second"):
        probe = r[who]
        assert probe["attempts"] and "connected" not in probe["attempts"].values(), (who, probe)
        assert probe["interfaces"] == ["lo"] and probe["routes"] == 0
    assert r["secret_accepted"] == []


@pytest.mark.parametrize("mode", MODES)
def test_the_listener_lives_only_in_its_sandbox(mode: str) -> None:
    r = report(mode)
    port = r["listener"]["port"][1]
    # The socket's namespace is the sandbox's, not the host's ...
    assert r["netns"]["listener"] == r["netns"]["sandbox"] != r["netns"]["host"]
    # ... so the host's own loopback has no such listener (the port is even held by a host socket).
    assert r["host_connect"] == "Connection refused" and not r["host_listening"]
    assert port in r["root"]["listening"]
    # Nobody inside can take the port over, not even with SO_REUSEADDR and SO_REUSEPORT.
    assert r["root"]["hijack"] == r["user"]["hijack"] == "Address already in use"
    # A second sandbox has a loopback of its own: nothing there, and the port is free to bind.
    second = r["second"]
    assert "Connection refused" in second["answer"] and port not in second["listening"]
    assert second["hijack"] == "bound"


@pytest.mark.parametrize("mode", MODES)
def test_refusals_are_clear_errors(mode: str) -> None:
    r = report(mode)
    assert r["squat"]["held"] == "held"  # the agent bound the port first
    assert r["squat"]["listen"].startswith("SandboxError: cannot listen in the sandbox: cannot listen on")
    assert r["squat"]["listen"].endswith("Address already in use")
    assert all(e.startswith("SandboxError: port must be an int in 0..65535") for e in r["bad_ports"])
    assert r["after_stop"] == "SandboxError: cannot listen: the sandbox was stopped"
    assert r["never_started"] == "SandboxError: cannot listen: the sandbox is not running; call start() first"


@pytest.mark.parametrize("mode", MODES)
def test_stop_and_cancellation_leave_no_helper_and_no_fd(mode: str) -> None:
    r = report(mode)
    assert r["leaked_fds"] == [] and r["lost_fds"] == []
    assert r["procs_after"] == r["procs_before"]  # the zygote only
    assert all("_init.py --zygote" in p for p in r["procs_after"])
    assert r["helpers"] == []
    assert r["state_left"] == []


@pytest.mark.parametrize("mode", MODES)
def test_works_with_the_network_on(mode: str) -> None:
    r = report(mode)
    if "online" not in r or "skipped" in r["online"]:
        pytest.skip(f"no user-mode network here: {r.get('online')}")
    online = r["online"]
    assert online["answer"] == ANSWER and "eth0" in online["interfaces"]
    assert "connected" not in online["attempts"].values()  # host loopback: still out of reach


async def test_the_callers_own_namespace_is_refused() -> None:
    """What a sandbox sharing the host's network would give: the host's own loopback. Refused."""
    fd = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        with pytest.raises(SandboxError, match="shares the host's network namespace"):
            await loopback.listen_in(fd, 0)
    finally:
        os.close(fd)


def test_a_gone_process_is_refused() -> None:
    proc = subprocess.Popen(["true"])
    proc.wait()
    with pytest.raises(SandboxError, match="is gone"):
        loopback.open_net_namespace(proc.pid)


def test_backends_that_can_listen_say_so() -> None:
    assert Capability.LOOPBACK in LocalSandbox.capabilities
    assert Capability.LOOPBACK not in CloudSandbox.capabilities
