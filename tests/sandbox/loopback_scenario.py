"""Scenario of tests/sandbox/test_loopback_listener.py (a script: run as root and, via setpriv, as nobody).

It plays the host: opens its own loopback services, starts local sandboxes with the network off,
serves a tiny HTTP answer on ``listen_loopback`` sockets, probes from inside (as sandbox root, as an
unprivileged user or capability-less root, from a second sandbox), checks the host's side, stops
everything and prints one JSON report of what it saw.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import shlex
import socket
import subprocess
import sys
from typing import Any

from ares.errors import SandboxError
from ares.sandbox.base import SandboxSpec
from ares.sandbox.capabilities import Capability
from ares.sandbox.local import LocalSandbox, network

SIOCGSKNS = 0x894C  # a socket's network namespace, as an fd

#: Inside the sandbox: GET the host's answer on the listener, then try every way back to the host.
PROBE = r"""
import json, os, socket, sys, urllib.request
a = json.loads(sys.argv[1])
out = {"uid": os.getuid()}
out["caps"] = next(l.split()[1] for l in open("/proc/self/status") if l.startswith("CapEff"))
try:
    with urllib.request.urlopen(f"http://127.0.0.1:{a['listener']}/v1/models", timeout=5) as r:
        out["answer"] = r.read().decode()
except Exception as e:
    out["answer"] = f"{type(e).__name__}: {e}"

def attempt(addr, port):
    s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET)
    s.settimeout(2)
    try:
        s.connect((addr, port))
        return "connected"
    except OSError as e:
        return os.strerror(e.errno) if e.errno else str(e)
    finally:
        s.close()

out["attempts"] = {f"{h}:{p}": attempt(h, p) for h, p in a["targets"]}
# Take over the listener's port: a second socket with SO_REUSEADDR and SO_REUSEPORT.
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
try:
    s.bind(("127.0.0.1", a["listener"]))
    s.listen()
    out["hijack"] = "bound"
except OSError as e:
    out["hijack"] = os.strerror(e.errno)
s.close()
out["interfaces"] = sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:])
out["routes"] = len(open("/proc/net/route").read().splitlines()) - 1
out["listening"] = sorted(
    int(f[1].split(":")[1], 16) for f in (l.split() for l in open("/proc/net/tcp").read().splitlines()[1:])
    if f[3] == "0A"
)
print(json.dumps(out))
"""

#: Inside the sandbox: hold 127.0.0.1:PORT in the background (so the host's listen must fail).
SQUAT = (
    "import socket, sys, time; s = socket.socket(); s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(); "
    "print('held', flush=True); time.sleep(300)"
)
#: Start SQUAT in the background and wait until it holds the port.
SQUAT_CMD = (
    "python3 -c {squat} {port} > /tmp/squat.log 2>&1 < /dev/null & "
    "for i in $(seq 200); do grep -q held /tmp/squat.log && break; sleep 0.05; done; cat /tmp/squat.log"
)


def host_addresses() -> list[str]:
    out = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True).stdout
    words = [line.split() for line in out.splitlines()]
    return [w[w.index("inet") + 1].split("/")[0] for w in words if "inet" in w]


def fds() -> list[str]:
    return sorted(os.listdir("/proc/self/fd"))


def ours() -> list[str]:
    """Command lines of this process's descendants (the zygote and its inits included)."""
    parents: dict[int, int] = {}
    lines: dict[int, str] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                lines[int(entry)] = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            parents[int(entry)] = int(stat[stat.rfind(b")") + 2 :].split()[1])
    found, frontier = [], {os.getpid()}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier}
        found.extend(lines.get(pid, "?") for pid in frontier)
    return sorted(found)


def helpers_anywhere() -> list[str]:
    """Every process on the machine running the listener helper."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError), open(f"/proc/{entry}/cmdline", "rb") as f:
            if b"_listen.py" in f.read():
                found.append(entry)
    return found


def netns_of(sock: socket.socket) -> int:
    fd = fcntl.ioctl(sock.fileno(), SIOCGSKNS)
    try:
        return os.fstat(fd).st_ino
    finally:
        os.close(fd)


def host_connect(port: int) -> str:
    with socket.socket() as s:
        s.settimeout(2)
        try:
            s.connect(("127.0.0.1", port))
            return "connected"
        except OSError as e:
            return os.strerror(e.errno) if e.errno else str(e)


async def raised(call: Any) -> str:
    try:
        result = await call
    except SandboxError as exc:
        return f"SandboxError: {exc}"
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    if isinstance(result, socket.socket):
        result.close()
    return "no error"


async def probe(sb: LocalSandbox, args: dict[str, Any], prefix: str = "", **kw: Any) -> dict[str, Any]:
    cmd = f"{prefix}python3 -c {shlex.quote(PROBE)} {shlex.quote(json.dumps(args))}"
    r = await sb.exec(cmd, timeout_s=30, **kw)
    lines = r.stdout.strip().splitlines()
    return json.loads(lines[-1]) if r.ok and lines else {"failed": r.stderr[-2000:], "exit": r.exit_code}


async def scenario() -> dict[str, Any]:
    report: dict[str, Any] = {"uid": os.geteuid()}
    warm = LocalSandbox()  # the zygote and its thread stay for the process: count from here
    await warm.start()
    await warm.stop()
    fds_before, procs_before = fds(), ours()

    secret = socket.create_server(("127.0.0.1", 0))  # host services the sandbox must never reach
    secret6 = socket.create_server(("::1", 0), family=socket.AF_INET6)
    everywhere = socket.create_server(("0.0.0.0", 0))
    reserved = socket.socket()  # held (not listening) on the host: the sandbox's listener takes it
    reserved.bind(("127.0.0.1", 0))
    port = reserved.getsockname()[1]
    seen: list[str] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = (await reader.readline()).decode().strip()
        seen.append(request)
        body = f"hello from the host: {request}".encode()
        writer.write(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()
        writer.close()

    first, second = LocalSandbox(SandboxSpec()), LocalSandbox(SandboxSpec())
    await asyncio.gather(first.start(), second.start())
    report["is_listener"] = Capability.LOOPBACK in first.capabilities
    listener = await first.listen_loopback(port)
    more = await asyncio.gather(*(first.listen_loopback() for _ in range(3)))
    report["listener"] = {
        "port": listener.getsockname(), "blocking": listener.getblocking(),
        "more_ports": sorted({s.getsockname()[1] for s in more}), "more_count": len(more),
    }  # fmt: skip
    for extra in more:
        extra.close()
    server = await asyncio.start_server(answer, sock=listener)
    targets = [
        ("127.0.0.1", secret.getsockname()[1]),
        ("::1", secret6.getsockname()[1]),
        *((address, everywhere.getsockname()[1]) for address in host_addresses()),
    ]
    args = {"listener": port, "targets": targets}
    report["root"] = await probe(first, args)
    if os.geteuid() == 0:  # sandbox ids 0-65535 are mapped: a real unprivileged user inside
        report["user"] = await probe(first, args, user="nobody")
    else:  # only sandbox root is mapped: root without a single capability instead
        prefix = "setpriv --inh-caps=-all --ambient-caps=-all --bounding-set=-all -- "
        report["user"] = await probe(first, args, prefix=prefix)
    report["second"] = await probe(second, args)
    report["host_connect"] = host_connect(port)
    with open("/proc/thread-self/ns/net", "rb") as f:
        host_ns = os.fstat(f.fileno()).st_ino
    assert first._proc is not None  # the init's namespaces are the sandbox's
    report["netns"] = {
        "listener": netns_of(listener), "host": host_ns,
        "sandbox": os.stat(f"/proc/{first._proc.pid}/ns/net").st_ino,
    }  # fmt: skip
    with open("/proc/self/net/tcp") as f:
        rows = [line.split() for line in f.read().splitlines()[1:]]
    report["host_listening"] = port in {int(r[1].split(":")[1], 16) for r in rows if r[3] == "0A"}
    report["secret_accepted"] = []
    for service in (secret, secret6, everywhere):
        service.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            conn, _ = service.accept()
            report["secret_accepted"].append(str(conn.getpeername()))
            conn.close()

    # The agent holds a port first: the host's listen there fails cleanly.
    probe_sock = socket.socket()
    probe_sock.bind(("127.0.0.1", 0))
    squatted = probe_sock.getsockname()[1]
    probe_sock.close()
    held = await first.exec(SQUAT_CMD.format(squat=shlex.quote(SQUAT), port=squatted), timeout_s=30)
    report["squat"] = {"held": held.stdout.strip(), "listen": await raised(first.listen_loopback(squatted))}
    report["bad_ports"] = [await raised(first.listen_loopback(bad)) for bad in (-1, 65536, True, "80")]  # type: ignore[arg-type]

    if network.find_tool() is not None:  # the agent's usual sandbox: network on, proxy on its loopback
        online = LocalSandbox(SandboxSpec(network=True))
        try:
            await online.start()
        except SandboxError as exc:
            report["online"] = {"skipped": str(exc)}
        else:
            try:
                with await online.listen_loopback() as sock:
                    online_server = await asyncio.start_server(answer, sock=sock)
                    online_args = {"listener": sock.getsockname()[1], "targets": targets[:2]}
                    report["online"] = await probe(online, online_args)
                    online_server.close()
                    await online_server.wait_closed()
            finally:
                await online.stop()

    # Cancelled at any point, a listen leaves no helper, socket or namespace fd behind (counted below).
    for turns in (0, 1, 2, 5, 20):
        task = asyncio.ensure_future(first.listen_loopback())
        for _ in range(turns):
            await asyncio.sleep(0)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            (await task).close()

    report["seen"] = list(seen)
    server.close()
    await server.wait_closed()
    await first.stop()
    report["after_stop"] = await raised(first.listen_loopback())
    report["never_started"] = await raised(LocalSandbox().listen_loopback())
    await second.stop()
    for sock in (secret, secret6, everywhere, reserved):
        sock.close()
    report["leaked_fds"] = sorted(set(fds()) - set(fds_before))
    report["lost_fds"] = sorted(set(fds_before) - set(fds()))
    report["procs_before"], report["procs_after"] = procs_before, ours()
    report["helpers"] = helpers_anywhere()
    return report


if __name__ == "__main__":
    print(json.dumps(asyncio.run(scenario())), file=sys.stdout)
