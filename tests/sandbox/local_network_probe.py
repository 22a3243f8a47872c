"""Scenario and probes for tests/sandbox/test_local_network.py (a script: an unprivileged child runs it too).

``scenario TOOL``: start host servers (TCP on 127.0.0.1, ::1 and 0.0.0.0, UDP on 127.0.0.1, an abstract
unix socket), a target in fresh user + network namespaces, ``attach`` TOOL to it, run ``probe`` inside
the namespace (nsenter, as root of its user namespace: every capability there, more than a sandbox
keeps), record what the servers saw, ``stop``, and print a JSON report.
``orphan TOOL``: attach, print the helper's pid and wait to be killed.
``bench TOOL N``: print attach() times in seconds, one per run.
``probe SPEC``: (inside the namespace) try every attempt in the JSON SPEC, print the outcomes.
"""

from __future__ import annotations

import asyncio
import fcntl
import ipaddress
import json
import os
import random
import select
import shutil
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000
SIOCGIFHWADDR = 0x8927
#: Sandbox root's host id when root-run (the first block of ares.sandbox.local.userns).
ROOT_RANGE_BASE = 0x7000_0000
PYTHON = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
TARGET = (
    "import ctypes, sys; libc = ctypes.CDLL(None, use_errno=True); "
    f"ok = libc.unshare({CLONE_NEWUSER | CLONE_NEWNET}) == 0; "
    "print('unshared' if ok else 'error', flush=True); sys.stdin.read()"
)


# --- inside the namespace ------------------------------------------------------------------------


def checksum(data: bytes) -> int:
    data += b"\0" * (len(data) % 2)
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def syn_packet(src: str, dst: str, port: int) -> tuple[int, bytes]:
    """An IPv4 or IPv6 TCP SYN from ``src`` to ``dst``:``port`` (ethertype, packet)."""
    v6 = ipaddress.ip_address(dst).version == 6
    family = socket.AF_INET6 if v6 else socket.AF_INET
    a, b = socket.inet_pton(family, src), socket.inet_pton(family, dst)
    sport, seq = random.randint(20000, 60000), random.getrandbits(32)
    tcp = struct.pack("!HHIIBBHHH", sport, port, seq, 0, 0x50, 2, 65535, 0, 0)  # SYN, no options
    pseudo = a + b + (struct.pack("!IxxxB", len(tcp), 6) if v6 else struct.pack("!xBH", 6, len(tcp)))
    tcp = tcp[:16] + struct.pack("!H", checksum(pseudo + tcp)) + tcp[18:]
    if v6:
        return 0x86DD, struct.pack("!IHBB", 6 << 28, len(tcp), 6, 64) + a + b + tcp
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 1, 0x4000, 64, 6, 0, a, b)
    return 0x0800, ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:] + tcp


def table(path: str) -> list[list[str]]:
    """The rows of a /proc/net table, split into words, without the header."""
    with open(path) as f:
        return [line.split() for line in f.read().splitlines()[1:]]


def default_gateway() -> str | None:
    """This network namespace's IPv4 default gateway."""
    for w in table("/proc/net/route"):
        if w[1] == "00000000":
            return socket.inet_ntoa(struct.pack("<I", int(w[2], 16)))
    return None


def gateway_mac() -> bytes:
    """The MAC of the namespace's default gateway (after talking to it once, so ARP knows it)."""
    gateway = default_gateway()
    assert gateway is not None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(b"x", (gateway, 9))
    for _ in range(50):
        for w in table("/proc/net/arp"):
            if w[0] == gateway and w[3] != "00:00:00:00:00:00":
                return bytes.fromhex(w[3].replace(":", ""))
        time.sleep(0.02)
    raise RuntimeError("the gateway does not answer ARP")


def attempt(kind: str, target: list, dev: str) -> str:
    try:
        if kind == "unix":
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(target[0].encode("latin-1"))
            return "connected"
        if kind == "raw":
            src, dst, port = target
            with socket.socket() as s:
                mac = fcntl.ioctl(s, SIOCGIFHWADDR, struct.pack("256s", dev.encode()))[18:24]
            ethertype, packet = syn_packet(src, dst, port)
            with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as s:
                s.bind((dev, 0))
                for _ in range(3):
                    s.send(gateway_mac() + mac + struct.pack("!H", ethertype) + packet)
            return "sent"
        address, port = target
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        kind_, _, bound = kind.partition("@")
        with socket.socket(family, socket.SOCK_DGRAM if kind_ == "udp" else socket.SOCK_STREAM) as s:
            s.settimeout(1.0)
            if bound:  # no capability needed: the kernel then routes even 127.0.0.1 out of the device
                s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, bound.encode())
            if kind_ == "udp":
                s.sendto(b"hello", (address, port))
                return "sent"
            s.connect((address, port))
            return "connected"
    except OSError as exc:
        return type(exc).__name__ if exc.errno is None else os.strerror(exc.errno)


def dns_query(server: str) -> str:
    header = struct.pack("!HHHHHH", 0x4152, 0x100, 1, 0, 0, 0)  # id, recursion desired, one question
    query = header + b"\x09localhost\x00" + struct.pack("!HH", 1, 1)  # A, IN
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(2.0)
        try:
            s.sendto(query, (server, 53))
            return "answered" if s.recv(512)[:2] == query[:2] else "garbled"
        except OSError as exc:
            return type(exc).__name__


def probe(spec: dict) -> dict:
    """Run in the namespace: the interface, then every attempt of ``spec``."""
    out = {
        "links": subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout,
        "addrs": subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True).stdout,
        "routes": subprocess.run(["ip", "route"], capture_output=True, text=True).stdout,
        # First and alone: the router's "no route" errors are rate limited per sender (route.error_cost).
        "metadata": attempt("tcp", ["169.254.169.254", 80], spec["dev"]),
    }
    with ThreadPoolExecutor(len(spec["attempts"])) as pool:  # each may take its 1 s timeout
        results = pool.map(lambda a: attempt(a[0], a[1], spec["dev"]), spec["attempts"])
        out["attempts"] = [[*a, result] for a, result in zip(spec["attempts"], results, strict=True)]
    if spec.get("dns"):
        out["dns"] = dns_query(spec["dns"])
    return out


# --- on the host ---------------------------------------------------------------------------------


def host_addresses() -> list[str]:
    """The host's IPv4 and IPv6 addresses but loopback and link-local ones."""
    out = subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True, check=True).stdout
    found = []
    for words in (line.split() for line in out.splitlines()):
        for key in ("inet", "inet6"):
            if key in words:
                address = ipaddress.ip_interface(words[words.index(key) + 1]).ip
                if not (address.is_loopback or address.is_link_local):
                    found.append(str(address))
    return found


def host_resolver_answers() -> str | None:
    """The host's first IPv4 resolver if it answers a query from the host itself, else None."""
    with open("/etc/resolv.conf") as f:
        lines = f.read().splitlines()
    for words in (line.split() for line in lines):
        if len(words) >= 2 and words[0] == "nameserver" and "." in words[1]:
            return words[1] if dns_query(words[1]) == "answered" else None
    return None


class Servers:
    """Listeners the sandbox must not reach; ``seen`` lists those that got a connection or datagram."""

    def __init__(self) -> None:
        self.socks: dict[str, socket.socket] = {}
        for name, family, kind, address in [
            ("tcp-127.0.0.1", socket.AF_INET, socket.SOCK_STREAM, "127.0.0.1"),
            ("tcp-::1", socket.AF_INET6, socket.SOCK_STREAM, "::1"),
            ("tcp-0.0.0.0", socket.AF_INET, socket.SOCK_STREAM, "0.0.0.0"),
            ("udp-127.0.0.1", socket.AF_INET, socket.SOCK_DGRAM, "127.0.0.1"),
        ]:
            s = socket.socket(family, kind)
            s.bind((address, 0))
            if kind == socket.SOCK_STREAM:
                s.listen()
            self.socks[name] = s
        self.abstract = f"\0ares-test-{random.getrandbits(64):016x}"
        self.socks["unix-abstract"] = socket.socket(socket.AF_UNIX)
        self.socks["unix-abstract"].bind(self.abstract)
        self.socks["unix-abstract"].listen()

    def port(self, name: str) -> int:
        return self.socks[name].getsockname()[1]

    def seen(self, grace: float) -> list[str]:
        ready, _, _ = select.select(list(self.socks.values()), [], [], grace)
        return sorted(name for name, s in self.socks.items() if s in ready)


def attempts(servers: Servers) -> list[tuple[str, list]]:
    """Every way to the host's loopback (and the host) we know of, each aimed at a server it must miss."""
    names = ("tcp-127.0.0.1", "tcp-::1", "tcp-0.0.0.0", "udp-127.0.0.1")
    p4, p6, pany, pudp = (servers.port(name) for name in names)
    out: list[tuple[str, list]] = [
        ("tcp", ["127.0.0.1", p4]),
        ("tcp", ["::1", p6]),
        ("tcp@eth0", ["127.0.0.1", p4]),
        ("tcp@eth0", ["127.0.0.2", p4]),
        ("tcp@eth0", ["::1", p6]),
        ("tcp@eth0", ["::ffff:127.0.0.1", p4]),
        ("tcp@eth0", ["127.0.0.1", pany]),
        ("udp@eth0", ["127.0.0.1", pudp]),
        ("raw", ["169.254.1.2", "127.0.0.1", p4]),
        ("raw", ["169.254.1.2", "127.0.0.1", pany]),
        ("raw", ["fe80::1", "::1", p6]),
        ("unix", [servers.abstract]),
    ]
    # The gateway, helper aliases (slirp4netns: 10.0.2.2 host, 10.0.2.3 DNS; pasta: its DNS forward,
    # the host's gateway) and the host's own addresses, on the loopback-only and the 0.0.0.0 port.
    gateway = default_gateway()
    for address in ["169.254.1.1", "169.254.1.53", "10.0.2.2", "10.0.2.3", *([gateway] if gateway else [])]:
        out += [("tcp", [address, p4]), ("tcp", [address, pany]), ("udp", [address, pudp])]
    for address in host_addresses():
        out += [("tcp", [address, p6 if ":" in address else p4]), ("tcp", [address, pany])]
        if ":" not in address:
            out.append(("raw", ["169.254.1.2", address, pany]))
    return out


def start_target() -> subprocess.Popen[str]:
    """A process in fresh user and network namespaces, with id maps like a local sandbox's."""
    proc = subprocess.Popen([PYTHON, "-c", TARGET], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "unshared":
        raise RuntimeError("cannot create user and network namespaces")
    root = f"/proc/{proc.pid}"
    if os.geteuid() == 0:  # root-run sandboxes map root to an unprivileged host range
        for name in ("uid_map", "gid_map"):
            with open(f"{root}/{name}", "w") as f:
                f.write(f"0 {ROOT_RANGE_BASE} 65536\n")
    else:
        with open(f"{root}/setgroups", "w") as f:
            f.write("deny\n")
        with open(f"{root}/uid_map", "w") as f:
            f.write(f"0 {os.geteuid()} 1\n")
        with open(f"{root}/gid_map", "w") as f:
            f.write(f"0 {os.getegid()} 1\n")
    return proc


def gone(pid: int) -> bool:
    """Whether ``pid`` has exited (a zombie waiting for a reaper counts: it runs nothing)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def enter(pid: int) -> list[str]:
    """nsenter into ``pid``'s user and network namespaces as their root (unprivileged: we already are)."""
    keep = ["--preserve-credentials"] if os.geteuid() != 0 else []
    return ["nsenter", f"--target={pid}", "--user", "--net", *keep, "--"]


def links(pid: int) -> str:
    return subprocess.run([*enter(pid), "ip", "-o", "link"], capture_output=True, text=True).stdout


def routes(pid: int) -> str:
    return subprocess.run([*enter(pid), "ip", "route"], capture_output=True, text=True).stdout


def eventually(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    """Whether ``condition`` holds within ``timeout`` seconds (for what the kernel does in the background)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def use_tool(tool: str) -> None:
    from ares.sandbox.local import network

    network.find_tool = lambda: shutil.which(tool)


async def scenario(tool: str) -> dict:
    from ares.sandbox.local import network

    use_tool(tool)
    servers = Servers()
    target = start_target()
    report: dict = {"uid": os.geteuid()}
    try:
        start = time.monotonic()
        net = await network.attach(target.pid)
        report.update(attach_s=time.monotonic() - start, tool=net.tool, resolv_conf=net.resolv_conf)
        resolver = host_resolver_answers()
        dns = net.resolv_conf.split()[1] if net.resolv_conf.startswith("nameserver ") else None
        spec = {"dev": "eth0", "attempts": attempts(servers), "dns": dns if resolver else None}
        cmd = [*enter(target.pid), PYTHON, __file__, "probe", json.dumps(spec)]
        run = await asyncio.create_subprocess_exec(*cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = await run.communicate()
        if run.returncode != 0:
            raise RuntimeError(f"probe failed: {err.decode()}")
        report.update(json.loads(out), seen=servers.seen(0.5))
        helper = net.pid
        report["helper_alive_before_stop"] = not gone(helper)
        await net.stop()
        await net.stop()  # idempotent
        report["helper_gone_after_stop"] = gone(helper)
        # The kernel tears the router namespace (and the veth pair) down in the background.
        report["eth0_gone_after_stop"] = eventually(lambda: "eth0" not in links(target.pid))
    finally:
        target.kill()
        target.wait()
    return report


async def orphan(tool: str) -> None:
    from ares.sandbox.local import network

    use_tool(tool)
    target = start_target()
    net = await network.attach(target.pid)
    print(json.dumps({"helper": net.pid, "target": target.pid}), flush=True)
    await asyncio.sleep(600)


async def bench(tool: str, runs: int) -> list[float]:
    from ares.sandbox.local import network

    use_tool(tool)
    times = []
    for _ in range(runs):
        target = start_target()
        start = time.monotonic()
        net = await network.attach(target.pid)
        times.append(time.monotonic() - start)
        found = routes(target.pid)
        assert "default via 169.254.1.1" in found, found  # usable the moment attach returns
        await net.stop()
        target.kill()
        target.wait()
    return times


def main() -> None:
    mode, arg = sys.argv[1], sys.argv[2]
    if mode == "probe":
        print(json.dumps(probe(json.loads(arg))))
    elif mode == "scenario":
        print(json.dumps(asyncio.run(scenario(arg))))
    elif mode == "orphan":
        asyncio.run(orphan(arg))
    elif mode == "bench":
        print(json.dumps(asyncio.run(bench(arg, int(sys.argv[3])))))


if __name__ == "__main__":
    main()
