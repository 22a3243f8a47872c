"""User-mode networking for local sandboxes: out to the network, never into the host's loopback.

Each tool runs the scenario of local_network_probe.py (host servers, a target in fresh user and network
namespaces, ``attach``, probes from inside with every capability of the namespace's root, ``stop``) as
root (sandbox root mapped to an unprivileged host range) and as an unprivileged user (nobody, via
setpriv; root is needed to switch, so unprivileged-only machines run that mode as themselves).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from types import ModuleType

import pytest

from ares.errors import SandboxUnavailableError
from ares.sandbox.local import network
from nobody_python import SKIP_REASON, nobody_python

SRC = Path(__file__).resolve().parents[2] / "src"
PROBE = Path(__file__).with_name("local_network_probe.py")
TOOLS = [tool for tool in ("pasta", "slirp4netns") if shutil.which(tool, path=network.SEARCH_PATH)]
NOBODY = 65534
LOOPBACK_SERVERS = {"tcp-127.0.0.1", "tcp-::1", "udp-127.0.0.1"}

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux namespaces only"),
    pytest.mark.skipif(not TOOLS, reason="neither pasta (package passt) nor slirp4netns is installed"),
]


def load_probe() -> ModuleType:
    """local_network_probe.py as a module (tests/ is not a package)."""
    spec = importlib.util.spec_from_file_location("local_network_probe", PROBE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


probe = load_probe()


def tun_usable_by_nobody() -> bool:
    return os.stat("/dev/net/tun").st_mode & 0o006 == 0o006


def command(mode: str, args: list[str]) -> tuple[list[str], dict[str, str]]:
    """The probe script run as root, or as nobody (with a 0666 /dev/net/tun in a private mount
    namespace when the machine's is 0600, as on hosts without udev; Debian's udev makes it 0666)."""
    env = {**os.environ, "PATH": network.SEARCH_PATH, "PYTHONPATH": str(SRC)}
    if mode == "root":
        if os.geteuid() != 0:
            pytest.skip("needs root")
        return [sys.executable, str(PROBE), *args], env
    if os.geteuid() != 0:
        if not os.access("/dev/net/tun", os.R_OK | os.W_OK):
            pytest.skip("/dev/net/tun is not usable by this user (chmod 0666 /dev/net/tun)")
        return [sys.executable, str(PROBE), *args], env
    python = nobody_python() or pytest.skip(SKIP_REASON)
    site = sysconfig.get_paths()["purelib"]
    env = {"PATH": network.SEARCH_PATH, "PYTHONPATH": f"{SRC}:{site}"}
    drop = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
    cmd = [*drop, python, str(PROBE), *args]
    if tun_usable_by_nobody():
        return cmd, env
    script = (  # the bind mount keeps the node alive after its directory is gone
        'mknod -m 666 "$1/tun" c 10 200 && mount --bind "$1/tun" /dev/net/tun && rm "$1/tun" && rmdir "$1" '
        '&& shift && exec "$@"'
    )
    private = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh"]
    return [*private, tempfile.mkdtemp(prefix="ares-tun-"), *cmd], env


def has_default_route() -> bool:
    with open("/proc/net/route") as f:
        return any(line.split()[1] == "00000000" for line in f.read().splitlines()[1:])


@functools.cache
def report(tool: str, mode: str) -> dict:
    if tool == "pasta" and not has_default_route():
        pytest.skip("pasta needs a host interface with an IPv4 default route")
    cmd, env = command(mode, ["scenario", tool])
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


MODES = ["root", "unprivileged"]
CASES = [pytest.param(tool, mode, id=f"{tool}-{mode}") for tool in TOOLS for mode in MODES]


@pytest.mark.parametrize(("tool", "mode"), CASES)
def test_interface_is_up_with_a_default_route(tool: str, mode: str) -> None:
    r = report(tool, mode)
    assert r["tool"] == tool
    assert (r["uid"] == 0) == (mode == "root")
    assert f"inet {network.SANDBOX_ADDR}/30" in r["addrs"]
    assert "inet 127.0.0.1/8" in r["addrs"]  # lo is up too
    eth0 = next(line for line in r["links"].splitlines() if "eth0" in line)
    assert "UP" in eth0.split("<")[1].split(">")[0].split(","), eth0
    assert f"default via {network.ROUTER_ADDR} dev eth0" in r["routes"]
    assert r["attach_s"] < network.START_TIMEOUT_S


@pytest.mark.parametrize(("tool", "mode"), CASES)
def test_host_loopback_is_unreachable(tool: str, mode: str) -> None:
    """No way we know (plain, SO_BINDTODEVICE, raw frames, gateway and helper aliases, the host's own
    addresses) gets a connection or datagram to a server on the host's 127.0.0.1 or ::1."""
    r = report(tool, mode)
    assert not LOOPBACK_SERVERS & set(r["seen"]), r["seen"]
    assert [a for a in r["attempts"] if a[2] == "connected"] == []
    kinds = {kind for kind, _, _ in r["attempts"]}
    assert {"tcp", "tcp@eth0", "udp@eth0", "raw"} <= kinds
    assert all(outcome == "sent" for kind, _, outcome in r["attempts"] if kind == "raw")  # they did go out


@pytest.mark.parametrize(("tool", "mode"), CASES)
def test_host_abstract_unix_socket_is_unreachable(tool: str, mode: str) -> None:
    r = report(tool, mode)
    assert "unix-abstract" not in r["seen"]
    assert [outcome for kind, _, outcome in r["attempts"] if kind == "unix"] == ["Connection refused"]


@pytest.mark.parametrize(("tool", "mode"), CASES)
def test_host_services_on_all_interfaces_are_unreachable(tool: str, mode: str) -> None:
    """A host server on 0.0.0.0 is not reached through any host address (the router refuses them all),
    nor cloud metadata (169.254.0.0/16)."""
    r = report(tool, mode)
    assert "tcp-0.0.0.0" not in r["seen"]
    assert r["metadata"] == "No route to host"


@pytest.mark.parametrize(("tool", "mode"), CASES)
def test_resolver_answers_when_the_hosts_does(tool: str, mode: str) -> None:
    """The positive control: the sandbox's resolv.conf works (skipped when the host has no resolver)."""
    r = report(tool, mode)
    if r["dns"] is None:
        pytest.skip("the host's own resolver does not answer (offline)")
    assert r["dns"] == "answered"


@pytest.mark.parametrize(("tool", "mode"), CASES)
def test_stop_leaves_no_helper_and_no_interface(tool: str, mode: str) -> None:
    r = report(tool, mode)
    assert r["helper_alive_before_stop"]
    assert r["helper_gone_after_stop"]
    assert r["eth0_gone_after_stop"]


@pytest.mark.parametrize(("tool", "mode"), CASES)
def test_helper_dies_with_ares(tool: str, mode: str) -> None:
    cmd, env = command(mode, ["orphan", tool])
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    assert child.stdout is not None
    line = child.stdout.readline()
    child.kill()
    child.wait()
    assert line, "the orphan scenario did not attach"
    helper = json.loads(line)["helper"]
    assert probe.eventually(lambda: probe.gone(helper))


async def test_no_tool_raises_with_the_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(network, "SEARCH_PATH", "/nonexistent")
    assert network.find_tool() is None
    with pytest.raises(SandboxUnavailableError, match=r"apt-get install passt"):
        await network.attach(os.getpid())


async def test_a_failing_helper_reports_its_stderr_and_leaves_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    if os.geteuid() != 0 and not os.access("/dev/net/tun", os.R_OK | os.W_OK):
        pytest.skip("/dev/net/tun is not usable by this user")
    fake = tmp_path / "pasta"
    fake.write_text("#!/bin/sh\necho 'pasta: cannot do it' >&2\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setattr(network, "find_tool", lambda: str(fake))
    target = probe.start_target()
    try:
        with pytest.raises(SandboxUnavailableError, match=r"pasta failed to start .*cannot do it"):
            await network.attach(target.pid)
        # The router namespace (and the veth pair with it) goes in the background.
        assert probe.eventually(lambda: "eth0" not in probe.links(target.pid))
    finally:
        target.send_signal(signal.SIGKILL)
        target.wait()
