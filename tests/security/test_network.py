"""Network: the host's loopback services and abstract unix sockets, with the network off and on.

The host side of each scenario listens on 127.0.0.1 and ::1 (ephemeral ports) and on an abstract
unix socket; the sandbox tries every address that could lead back to the host. With the network on
(pasta or slirp4netns), the gateway and the link-local addresses those tools use are tried too:
pasta, by default, maps the gateway address to the host's loopback.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable
from typing import Any

import pytest

Scenario = Callable[..., dict[str, Any]]

PROBE = r"""
import json, os, socket, sys
a = json.loads(sys.argv[1])

def gateways():
    found = []
    try:
        for line in open("/proc/net/route").read().splitlines()[1:]:
            f = line.split()
            if len(f) > 2 and f[2] != "00000000":
                found.append(socket.inet_ntoa(bytes.fromhex(f[2])[::-1]))
    except OSError:
        pass
    return found

def nameservers():
    try:
        lines = [l.split() for l in open("/etc/resolv.conf")]
        return [f[1] for f in lines if len(f) > 1 and f[0] == "nameserver"]
    except OSError:
        return []

targets = ["127.0.0.1", "::1", "10.0.2.2", "10.0.2.3", "169.254.1.1", "169.254.1.2", "169.254.0.1",
           "169.254.169.254"] + gateways() + nameservers() + a["host_addrs"]
results = {}
for addr in dict.fromkeys(targets):
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    port = a["port6"] if family == socket.AF_INET6 else a["port4"]
    if port is None:
        continue
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(0.5)
    try:
        s.connect((addr, port))
        results[f"{addr}:{port}"] = "connected"
    except OSError as e:
        results[f"{addr}:{port}"] = type(e).__name__ + ":" + (os.strerror(e.errno) if e.errno else str(e))
    finally:
        s.close()

u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    u.connect("\0" + a["abstract"])
    abstract = "connected"
except OSError as e:
    abstract = os.strerror(e.errno) if e.errno else str(e)
u.close()
out = {"tcp": results, "abstract": abstract, "netns": os.stat("/proc/self/ns/net").st_ino}
out["interfaces"] = [l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:]]
out["routes"] = gateways()
routes = open("/proc/net/route").read().splitlines()[1:]
out["default_route"] = any(l.split()[1] == "00000000" for l in routes)
print(json.dumps(out))
"""

SCENARIO = """
import secrets


def listen(family, addr):
    s = socket.socket(family, socket.SOCK_STREAM)
    try:
        s.bind((addr, 0))
    except OSError:
        s.close()
        return None, None
    s.listen(16)
    s.setblocking(False)
    return s, s.getsockname()[1]


def accepted(s):
    count = 0
    while s is not None:
        try:
            conn, _ = s.accept()
        except BlockingIOError:
            break
        conn.close()
        count += 1
    return count


def host_addrs():
    addrs = []
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET):
            addrs.append(info[4][0])
    except OSError:
        pass
    return [a for a in dict.fromkeys(addrs) if not a.startswith("127.")]


async def scenario(args):
    s4, port4 = listen(socket.AF_INET, "127.0.0.1")
    s6, port6 = listen(socket.AF_INET6, "::1")
    name = "ares-sec-" + secrets.token_hex(6)
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind("\\0" + name)
    unix.listen(16)
    unix.setblocking(False)
    host_netns = os.stat("/proc/self/ns/net").st_ino
    host_ifaces = [l.split(":")[0].strip() for l in Path("/proc/net/dev").read_text().splitlines()[2:]]
    argv = {"port4": port4, "port6": port6, "abstract": name, "host_addrs": host_addrs()}
    async with LocalSandbox(SandboxSpec(network=args["network"])) as sb:
        inside = await probe(sb, args["probe"], argv=argv, timeout_s=60)
    return {"inside": inside, "host_netns": host_netns, "host_ifaces": host_ifaces,
            "accepted": {"tcp4": accepted(s4), "tcp6": accepted(s6), "abstract": accepted(unix)}}
"""

NETWORK_TOOLS = ("pasta", "slirp4netns")


def tun_open_to_all() -> bool:
    try:
        return stat.S_IMODE(os.stat("/dev/net/tun").st_mode) & 0o006 == 0o006
    except OSError:
        return False


@pytest.fixture(scope="module", params=["off", "on"])
def result(request: pytest.FixtureRequest, scenario: Scenario, who: str) -> dict[str, Any]:
    if request.param == "on" and not any(shutil.which(tool) for tool in NETWORK_TOOLS):
        pytest.skip("the network-on cases need pasta (Debian: passt) or slirp4netns on PATH")
    if request.param == "on" and who == "nobody" and not tun_open_to_all():
        pytest.skip("unprivileged user-mode networking needs /dev/net/tun mode 0666 (.ci/run sets it)")
    res = scenario(SCENARIO, {"probe": PROBE, "network": request.param == "on"})
    res["network"] = request.param
    return res


def _inside(result: dict[str, Any]) -> dict[str, Any]:
    data = result["inside"]["data"]
    assert data is not None, result["inside"]["exec"]
    return data


def test_host_loopback_services_are_unreachable(result: dict[str, Any]) -> None:
    """Attack: connect to a service the host keeps on its loopback (databases, metadata proxies, ARES's
    own LLM proxy) via 127.0.0.1, ::1, the gateway, 10.0.2.2/10.0.2.3 (slirp), pasta's link-local
    addresses, 169.254.169.254, the nameservers and the host's own addresses. Expected: no connect
    succeeds and the host's listeners accept nothing."""
    connected = [t for t, outcome in _inside(result)["tcp"].items() if outcome == "connected"]
    assert not connected, f"host loopback reached from the sandbox (network {result['network']}): {connected}"
    assert result["accepted"]["tcp4"] == 0 and result["accepted"]["tcp6"] == 0, result["accepted"]


def test_host_abstract_unix_socket_is_unreachable(result: dict[str, Any]) -> None:
    """Attack: connect to a host abstract unix socket ("\\0name": no file, no permissions, scoped by
    network namespace; X11, D-Bus, containerd shims listen on such). Expected: connect fails."""
    assert _inside(result)["abstract"] != "connected"
    assert result["accepted"]["abstract"] == 0


def test_sandbox_has_its_own_network_namespace(result: dict[str, Any]) -> None:
    """Attack surface: sharing the host's network namespace exposes every host socket and interface.
    Expected: the sandbox's /proc/self/ns/net inode differs from the host's; with the network off, its
    only interface is lo."""
    data = _inside(result)
    assert data["netns"] != result["host_netns"], "the sandbox shares the host's network namespace"
    if result["network"] == "off":
        assert data["interfaces"] == ["lo"], data["interfaces"]


def test_network_on_still_reaches_out(result: dict[str, Any]) -> None:
    """Not an attack: the isolation above must not come from having no network at all. Expected: with
    the network on, the sandbox has an interface besides lo and a default route."""
    if result["network"] == "off":
        pytest.skip("network off")
    data = _inside(result)
    assert set(data["interfaces"]) - {"lo"}, data["interfaces"]
    assert data["default_route"], "no default route with the network on"
