"""``listen_loopback`` for containers: a host-owned listener in the container's network namespace.

Only an engine on this host runs its containers' namespaces where this process can join them (the
socket is made by the local backend's helper, see ``ares.sandbox.local.loopback``). The engine's
word for the container's init (``State.Pid``) is not trusted blindly: a Docker Desktop VM, another
machine behind a forwarded socket, or a different pid namespace would name an unrelated process of
this host, whose network namespace may be the host's own. So the pid must be alive, in a cgroup
named after the container, for as long as its namespace is being opened.
"""

from __future__ import annotations

import os
import select
import socket
from collections.abc import Mapping
from typing import Any

from ares.errors import SandboxError, SandboxUnavailableError
from ares.sandbox.local import loopback


def check_local_engine(base_url: str) -> None:
    """Refuse an engine reached over the network: its containers' namespaces are elsewhere."""
    if not base_url.startswith("unix://"):
        raise SandboxUnavailableError(
            f"listen_loopback needs the Docker engine on this host (a unix:// socket), not {base_url}: "
            "a remote engine's containers live in network namespaces this process cannot enter"
        )


def open_container_namespace(container: str, info: Mapping[str, Any]) -> int:
    """An fd of the network namespace of ``container`` (its id), given its ``inspect`` ``info``."""
    state = info.get("State") or {}
    pid = state.get("Pid")
    if not state.get("Running") or not isinstance(pid, int) or pid <= 0:
        raise SandboxError("the sandbox container is not running")
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        raise _elsewhere(pid) from None
    try:
        try:
            with open(f"/proc/{pid}/cgroup") as f:
                cgroups = f.read()
        except OSError:
            cgroups = ""
        if container not in cgroups:
            raise _elsewhere(pid)
        net = loopback.open_net_namespace(pid)
        if select.select([pidfd], [], [], 0)[0]:  # it exited: the namespace may be another's
            os.close(net)
            raise SandboxError("the sandbox container's init exited")
        return net
    finally:
        os.close(pidfd)


async def listen(container: str, info: Mapping[str, Any], port: int) -> socket.socket:
    """A listening socket on 127.0.0.1:``port`` inside ``container`` (see ``LoopbackListener``)."""
    loopback.check_port(port)
    net = open_container_namespace(container, info)
    try:
        return await loopback.listen_in(net, port)
    finally:
        os.close(net)


def _elsewhere(pid: int) -> SandboxUnavailableError:
    return SandboxUnavailableError(
        f"the engine says the container's init is pid {pid}, which is not the container's on this host: "
        "the engine runs elsewhere (a VM, another machine or pid namespace). listen_loopback needs an "
        "engine whose containers are processes of this host"
    )
