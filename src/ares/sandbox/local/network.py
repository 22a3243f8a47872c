"""User-mode networking for a sandbox's own network namespace.

A sandbox that wants the network gets it from ``pasta`` (package passt) or, failing that,
``slirp4netns``: helpers that terminate the sandbox's TCP, UDP and ICMP on a tap device and re-issue
them from ordinary sockets on the host, so no root, bridge or firewall rule is needed.

Neither helper may serve the sandbox's namespace directly. Whatever their flags, both re-issue
packets addressed to 127.0.0.1 (pasta also ::1 and ::ffff:127.0.0.1) on the host (seen with passt
2023-03-09 and slirp4netns 1.2.0), and a process in the sandbox emits such packets without any
capability: SO_BINDTODEVICE on the tap makes the kernel route 127.0.0.1 out of it. So the helper
serves a *router* namespace that the sandbox cannot configure (it has no handle on it), joined to
the sandbox by a veth pair::

    sandbox: eth0 169.254.1.2/30 ==veth== ares-r 169.254.1.1/30 :router: ares0 (tap) -- helper -- host

The router's kernel forwards only what may leave: martian (loopback) destinations are never
forwarded, IPv6 is not forwarded at all, ``rp_filter`` drops spoofed sources, and unreachable
routes cover link-local 169.254.0.0/16 (cloud metadata services) and every IPv4 address of the host
at attach time (so host services bound to 0.0.0.0, which the helper would reach over loopback and
past the host's firewall, stay out of reach). The helper forwards no port in either direction and
maps nothing to the host's loopback but its DNS proxy: UDP port 53 of ``PASTA_DNS`` (pasta) or
``SLIRP_DNS`` (slirp4netns) goes to the host's first resolver, even one on loopback; other ports and
TCP to those addresses do not reach the host's loopback.

The router namespace belongs to the sandbox's user namespace (an unprivileged owner can make no
other that the veth pair could join), so this holds only while sandbox processes lack CAP_NET_ADMIN
(local sandboxes drop it): with it they could act on the router through the veth's link-netnsid.

The router namespace lives exactly as long as the helper (nothing else holds it), and the veth pair
with it. The helper is the caller's child, started under ``PR_SET_PDEATHSIG=SIGKILL`` (setpriv), so
it dies with the thread that started it (the event loop's); slirp4netns also exits when ARES's end
of its ``--exit-fd`` pipe closes. Neither exits on its own when the sandbox dies (verified: pasta
keeps a reference to the namespace), so ``UserNetwork.stop`` must be called on every path.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import shutil
import tempfile
from dataclasses import dataclass, field

from ares.errors import SandboxUnavailableError

INSTALL_HINT = "install pasta (apt-get install passt) or slirp4netns (apt-get install slirp4netns)"
#: Where the helper and the plumbing it needs are looked up (sbin included: `ip` lives there).
SEARCH_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SANDBOX_IF, SANDBOX_ADDR, ROUTER_ADDR, LINK = "eth0", "169.254.1.2", "169.254.1.1", "169.254.1.0/30"
TAP = "ares0"
#: pasta sends UDP port 53 to this address to the host's resolver (``--dns-forward``).
PASTA_DNS = "169.254.1.53"
#: slirp4netns's built-in DNS proxy (network address + 3).
SLIRP_DNS = "10.0.2.3"
START_TIMEOUT_S = 10.0
STDERR_TAIL = 4096

# Runs in the router namespace as root of the sandbox's user namespace. $1 and $2 are `ip -batch`
# scripts for the router and the sandbox, $3 the sandbox's pid. After "ready" it waits for the helper
# to create the tap, then answers ARP on it for the sandbox (slirp4netns asks for every destination),
# adds the route the host sends (if any) and exits: the helper then holds the namespace.
ROUTER_SCRIPT = f"""\
set -eu
printf '%s' "$1" | ip -batch -
echo 1 > /proc/sys/net/ipv4/ip_forward
echo 1 > /proc/sys/net/ipv4/conf/all/rp_filter
printf '%s' "$2" | nsenter --net="/proc/$3/ns/net" ip -batch -
echo ready
read -r route
echo 1 > /proc/sys/net/ipv4/conf/{TAP}/proxy_arp
[ -z "$route" ] || ip route add $route
"""


def find_tool() -> str | None:
    """The absolute path of pasta, else of slirp4netns (the fallback), else None."""
    return shutil.which("pasta", path=SEARCH_PATH) or shutil.which("slirp4netns", path=SEARCH_PATH)


@dataclass(eq=False)
class UserNetwork:
    """A running helper that gives one sandbox's network namespace its connection to the outside.

    ``tool`` is "pasta" or "slirp4netns"; ``resolv_conf`` is the text the sandbox's /etc/resolv.conf
    must hold (the host's own may name a loopback resolver the sandbox cannot reach).
    """

    tool: str
    resolv_conf: str
    _proc: asyncio.subprocess.Process = field(repr=False)
    _stderr: asyncio.Task[bytes] = field(repr=False)
    _fds: list[int] = field(default_factory=list, repr=False)

    @property
    def pid(self) -> int:
        """The helper's host pid (for example to put it in the sandbox's cgroups)."""
        return self._proc.pid

    async def stop(self) -> None:
        """Kill the helper and reap it; the router namespace and the sandbox's eth0 go with it."""
        if self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.kill()
        await self._proc.wait()
        while self._fds:
            os.close(self._fds.pop())
        self._stderr.cancel()


async def attach(pid: int) -> UserNetwork:
    """Connect the network namespace of host process ``pid`` to the outside through a helper.

    ``pid`` must have unshared CLONE_NEWUSER | CLONE_NEWNET, have its uid/gid maps written and still
    be dumpable. Returns once the sandbox's eth0 has its address and default route and the helper
    is ready; raises SandboxUnavailableError when no helper is installed or it cannot start.
    """
    helper = find_tool()
    if helper is None:
        raise SandboxUnavailableError(f"network access needs a user-mode network helper: {INSTALL_HINT}")
    tools = {name: shutil.which(name, path=SEARCH_PATH) for name in ("ip", "nsenter", "unshare", "setpriv")}
    missing = sorted(name for name, path in tools.items() if path is None)
    if missing:
        raise SandboxUnavailableError(
            f"network access needs {', '.join(missing)}: apt-get install iproute2 util-linux"
        )
    if os.geteuid() != 0 and not os.access("/dev/net/tun", os.R_OK | os.W_OK):
        raise SandboxUnavailableError(
            "network access needs /dev/net/tun to be usable by unprivileged users "
            "(Debian's udev makes it 0666: chmod 0666 /dev/net/tun)"
        )
    router = await _start_router(pid, await _host_addresses())
    try:
        if os.path.basename(helper) == "pasta":
            network = await _start_pasta(helper, router.pid)
            route = f"{PASTA_DNS}/32 dev {TAP}"
        else:
            network = await _start_slirp(helper, router.pid)
            route = ""
        try:
            await _finish_router(router, route)
        except BaseException:
            await network.stop()
            raise
    except BaseException:
        if router.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                router.kill()
        await router.wait()
        raise
    return network


async def _host_addresses() -> list[str]:
    """The host's non-loopback IPv4 addresses, which the router makes unreachable."""
    proc = await asyncio.create_subprocess_exec(
        "ip", "-4", "-o", "addr", "show", env={"PATH": SEARCH_PATH},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate()
    if proc.returncode != 0:
        raise SandboxUnavailableError(f"cannot list the host's addresses: {err.decode(errors='replace')}")
    link = ipaddress.ip_network(LINK)
    addresses: dict[str, None] = {}  # an address can be on several interfaces
    for line in out.decode().splitlines():
        words = line.split()
        if "inet" in words:
            address = ipaddress.ip_interface(words[words.index("inet") + 1]).ip
            if not address.is_loopback and address not in link:
                addresses[str(address)] = None
    return list(addresses)


async def _start_router(pid: int, blocked: list[str]) -> asyncio.subprocess.Process:
    """Start the router namespace's first process and wait until both ends of the link are up."""
    router_batch = "".join(
        [
            "link set lo up\n",
            f"link add ares-r type veth peer name {SANDBOX_IF} netns {pid}\n",
            f"addr add {ROUTER_ADDR}/30 dev ares-r\n",
            "link set ares-r up\n",
            "route add unreachable 169.254.0.0/16\n",
            *(f"route add unreachable {address}/32\n" for address in blocked),
        ]
    )
    sandbox_batch = (
        f"link set lo up\naddr add {SANDBOX_ADDR}/30 dev {SANDBOX_IF}\nlink set {SANDBOX_IF} up\n"
        f"route add default via {ROUTER_ADDR} dev {SANDBOX_IF}\n"
    )
    # Root becomes sandbox root (its own uid is not mapped); an unprivileged owner already is sandbox
    # root, and keeps its credentials (setgroups is denied in its namespace).
    keep = ["--preserve-credentials"] if os.geteuid() != 0 else []
    proc = await asyncio.create_subprocess_exec(
        "nsenter", f"--user=/proc/{pid}/ns/user", *keep, "--", "unshare", "--net", "--",
        "sh", "-c", ROUTER_SCRIPT, "ares-router", router_batch, sandbox_batch, str(pid),
        env={"PATH": SEARCH_PATH}, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), START_TIMEOUT_S)
    except TimeoutError:
        line = b""
    if line != b"ready\n":
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        err = await proc.stderr.read()
        await proc.wait()
        raise SandboxUnavailableError(
            f"cannot set up the sandbox's network namespace: {err.decode(errors='replace').strip()}"
        )
    return proc


async def _finish_router(router: asyncio.subprocess.Process, route: str) -> None:
    """Hand the router its last route (it needs the helper's tap) and reap it."""
    try:
        _, err = await asyncio.wait_for(router.communicate(route.encode() + b"\n"), START_TIMEOUT_S)
    except TimeoutError:
        err = b"timed out"
    if router.returncode != 0:
        raise SandboxUnavailableError(f"cannot route the sandbox's DNS: {err.decode(errors='replace')}")


async def _start_pasta(pasta: str, router_pid: int) -> UserNetwork:
    """pasta in the foreground; it writes its pid to the (FIFO) pid file once the tap is configured."""
    with tempfile.TemporaryDirectory(prefix="ares-pasta-") as tmp:
        fifo = os.path.join(tmp, "ready")
        os.mkfifo(fifo, 0o600)
        ready = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            cmd = [
                pasta, "--foreground", "--quiet",
                # As root pasta would switch to nobody before joining the namespaces, which then fails;
                # it keeps uid 0 but its capabilities only count in the sandbox's user namespace.
                *(["--runas", "0"] if os.geteuid() == 0 else []),
                "--ipv4-only", "--config-net", "--ns-ifname", TAP, "--no-dhcp",
                "--tcp-ports", "none", "--udp-ports", "none", "--tcp-ns", "none", "--udp-ns", "none",
                "--no-map-gw", "--dns-forward", PASTA_DNS, "--pid", fifo, str(router_pid),
            ]  # fmt: skip
            proc, stderr = await _spawn(cmd, ())
            network = UserNetwork("pasta", f"nameserver {PASTA_DNS}\n", proc, stderr)
            try:
                await _wait_ready(proc, stderr, ready, "pasta")
            except BaseException:  # cancelled included: the helper never outlives a failed attach
                await network.stop()
                raise
        finally:
            os.close(ready)
    return network


async def _start_slirp(slirp: str, router_pid: int) -> UserNetwork:
    """slirp4netns, ready when it writes to ``--ready-fd``; it exits when ``--exit-fd`` hangs up."""
    ready_r, ready_w = os.pipe()
    exit_r, exit_w = os.pipe()
    userns = f"/proc/{router_pid}/ns/user"
    # Root runs it directly (it must open /dev/net/tun, often 0600; it then drops every capability
    # but CAP_NET_BIND_SERVICE). Unprivileged, it must start as root of the namespace to sandbox itself.
    if os.geteuid() == 0:
        prefix, userns_flag = [], [f"--userns-path={userns}"]
    else:
        prefix, userns_flag = ["nsenter", f"--user={userns}", "--preserve-credentials", "--"], []
    cmd = [
        *prefix, slirp, "--configure", f"--ready-fd={ready_w}", f"--exit-fd={exit_r}",
        "--disable-host-loopback", "--enable-sandbox", "--enable-seccomp", *userns_flag,
        "--netns-type=path", f"/proc/{router_pid}/ns/net", TAP,
    ]  # fmt: skip
    try:
        proc, stderr = await _spawn(cmd, (ready_w, exit_r))
    except BaseException:
        for fd in (ready_r, ready_w, exit_r, exit_w):
            os.close(fd)
        raise
    os.close(ready_w)
    os.close(exit_r)
    network = UserNetwork("slirp4netns", f"nameserver {SLIRP_DNS}\n", proc, stderr, [exit_w])
    try:
        await _wait_ready(proc, stderr, ready_r, "slirp4netns")
    except BaseException:
        await network.stop()
        raise
    finally:
        os.close(ready_r)
    return network


async def _spawn(
    cmd: list[str], fds: tuple[int, ...]
) -> tuple[asyncio.subprocess.Process, asyncio.Task[bytes]]:
    """Start ``cmd`` under PR_SET_PDEATHSIG=SIGKILL, its stderr drained (keeping the tail)."""
    proc = await asyncio.create_subprocess_exec(
        "setpriv", "--pdeathsig", "KILL", "--", *cmd, env={"PATH": SEARCH_PATH}, pass_fds=fds,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    assert proc.stderr is not None
    return proc, asyncio.ensure_future(_tail(proc.stderr))


async def _tail(stream: asyncio.StreamReader) -> bytes:
    """Read ``stream`` to its end (so the helper never blocks on a full pipe); return the last bytes."""
    tail = b""
    while chunk := await stream.read(STDERR_TAIL):
        tail = (tail + chunk)[-STDERR_TAIL:]
    return tail


async def _wait_ready(
    proc: asyncio.subprocess.Process, stderr: asyncio.Task[bytes], fd: int, name: str
) -> None:
    """Wait until the helper signals readiness on ``fd``; on exit, EOF or timeout kill it and raise."""
    loop = asyncio.get_running_loop()
    readable: asyncio.Future[None] = loop.create_future()
    loop.add_reader(fd, lambda: readable.done() or readable.set_result(None))
    exited = asyncio.ensure_future(proc.wait())
    try:
        await asyncio.wait({readable, exited}, timeout=START_TIMEOUT_S, return_when=asyncio.FIRST_COMPLETED)
    finally:
        loop.remove_reader(fd)
        exited.cancel()
    if readable.done() and os.read(fd, 64):
        return
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
    await proc.wait()
    err = (await stderr).decode(errors="replace").strip() or f"exit status {proc.returncode}"
    raise SandboxUnavailableError(f"{name} failed to start ({INSTALL_HINT} if it is broken): {err}")
