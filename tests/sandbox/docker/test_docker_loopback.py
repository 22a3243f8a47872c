"""``DockerSandbox.listen_loopback``: a host-owned listener in the container's network namespace.

The engine here runs on this host (podman), so the listener works; a remote engine, a pid the
engine names that is not the container's, and an unprivileged host user facing a rootful engine
are refused with SandboxUnavailableError. The in-sandbox probe is loopback_scenario.py's.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shlex
import socket
import subprocess
import sysconfig
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType
from typing import Any

import docker
import pytest
from docker_engine_kit import Engine

from ares.errors import SandboxError, SandboxUnavailableError
from ares.sandbox import SandboxSpec
from ares.sandbox.capabilities import Capability
from ares.sandbox.docker import DockerConfig, DockerEngine, DockerSandbox, DockerSandboxFactory
from ares.sandbox.docker.loopback import open_container_namespace
from nobody_python import SKIP_REASON, can_drop, nobody_python

SRC = Path(__file__).resolve().parents[3] / "src"
SCENARIO = Path(__file__).resolve().parents[1] / "loopback_scenario.py"
NOBODY = 65534
DROP = f"setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups -- "
ANSWER = "hello from the host: GET /v1/models HTTP/1.1"


def load_scenario() -> ModuleType:
    spec = importlib.util.spec_from_file_location("loopback_scenario", SCENARIO)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


kit = load_scenario()


async def serve(sock: socket.socket, seen: list[str]) -> asyncio.Server:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = (await reader.readline()).decode().strip()
        seen.append(request)
        body = f"hello from the host: {request}".encode()
        writer.write(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()
        writer.close()

    return await asyncio.start_server(answer, sock=sock)


async def probe(sb: DockerSandbox, args: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    cmd = f"{prefix}python3 -c {shlex.quote(kit.PROBE)} {shlex.quote(json.dumps(args))}"
    r = await sb.exec(cmd, timeout_s=30)
    lines = r.stdout.strip().splitlines()
    return json.loads(lines[-1]) if r.ok and lines else {"failed": r.stderr[-2000:], "exit": r.exit_code}


@pytest.fixture
async def second(factory: DockerSandboxFactory) -> AsyncIterator[DockerSandbox]:
    sb = factory(SandboxSpec())
    await sb.start()
    yield sb
    await sb.stop()


async def test_the_container_reaches_the_host_and_nothing_else(
    shared_sandbox: DockerSandbox, second: DockerSandbox, docker_client: docker.DockerClient
) -> None:
    sandbox = shared_sandbox
    assert Capability.LOOPBACK in sandbox.capabilities
    secret = socket.create_server(("127.0.0.1", 0))  # host services the container must never reach
    everywhere = socket.create_server(("0.0.0.0", 0))
    reserved = socket.socket()  # held on the host: the container's listener takes the same port
    reserved.bind(("127.0.0.1", 0))
    port = reserved.getsockname()[1]
    seen: list[str] = []
    listener = await sandbox.listen_loopback(port)
    server = await serve(listener, seen)
    try:
        assert listener.getsockname() == ("127.0.0.1", port) and not listener.getblocking()
        targets = [
            ("127.0.0.1", secret.getsockname()[1]),
            *((address, everywhere.getsockname()[1]) for address in kit.host_addresses()),
        ]
        args = {"listener": port, "targets": targets}
        root, user = await probe(sandbox, args), await probe(sandbox, args, DROP)
        assert (root["uid"], user["uid"]) == (0, NOBODY)
        assert root["answer"] == user["answer"] == ANSWER and seen == ["GET /v1/models HTTP/1.1"] * 2
        for inside in (root, user):  # network "none": lo only, no route, no host service
            assert inside["attempts"] and "connected" not in inside["attempts"].values(), inside
            assert inside["interfaces"] == ["lo"] and inside["routes"] == 0
            assert inside["hijack"] == "Address already in use"
        # The listener is the container's, not the host's; a second container has its own loopback.
        pid = docker_client.api.inspect_container(sandbox.container_id)["State"]["Pid"]
        assert kit.netns_of(listener) == os.stat(f"/proc/{pid}/ns/net").st_ino
        assert kit.netns_of(listener) != os.stat("/proc/thread-self/ns/net").st_ino
        assert kit.host_connect(port) == "Connection refused"
        other = await probe(second, args)
        assert "Connection refused" in other["answer"] and other["hijack"] == "bound"
        for service in (secret, everywhere):
            service.setblocking(False)
            with pytest.raises(BlockingIOError):
                service.accept()
    finally:
        server.close()
        await server.wait_closed()
        for sock in (secret, everywhere, reserved):
            sock.close()


async def test_stop_leaves_no_helper_and_no_fd(docker_engine: Engine) -> None:
    before = kit.fds()
    made = DockerSandboxFactory(DockerConfig(base_url=docker_engine.base_url))
    sb = made(SandboxSpec())
    await sb.start()
    try:
        listeners = await asyncio.gather(sb.listen_loopback(), sb.listen_loopback())
        assert len({s.getsockname()[1] for s in listeners}) == 2
        for listener in listeners:
            listener.close()
        with pytest.raises(SandboxError, match="Address already in use"):
            held = await sb.listen_loopback()
            try:
                await sb.listen_loopback(held.getsockname()[1])
            finally:
                held.close()
        with pytest.raises(SandboxError, match="port must be an int"):
            await sb.listen_loopback(70000)
    finally:
        await sb.stop()
    with pytest.raises(SandboxError, match="the sandbox was stopped"):
        await sb.listen_loopback()
    made.close()
    assert kit.fds() == before
    assert kit.helpers_anywhere() == []


async def test_a_remote_engine_is_refused(docker_client: docker.DockerClient) -> None:
    """The same engine, but reached as a remote one would be: its namespaces are not ours to enter."""
    remote = DockerEngine(DockerConfig(base_url="tcp://127.0.0.1:2375"), client=docker_client)
    async with DockerSandbox(SandboxSpec(), engine=remote) as sb:
        with pytest.raises(SandboxUnavailableError, match="needs the Docker engine on this host"):
            await sb.listen_loopback()


def test_a_pid_that_is_not_the_containers_is_refused(shared_sandbox: DockerSandbox) -> None:
    """An engine in a VM or another pid namespace names pids of its own: never trust one blindly."""
    sandbox = shared_sandbox
    assert sandbox.container_id is not None
    with pytest.raises(SandboxUnavailableError, match="not the container's on this host"):
        open_container_namespace(sandbox.container_id, {"State": {"Running": True, "Pid": os.getpid()}})
    gone = subprocess.Popen(["true"])
    gone.wait()
    with pytest.raises(SandboxUnavailableError, match="not the container's on this host"):
        open_container_namespace(sandbox.container_id, {"State": {"Running": True, "Pid": gone.pid}})
    with pytest.raises(SandboxError, match="not running"):
        open_container_namespace(sandbox.container_id, {"State": {"Running": False, "Pid": 0}})


UNPRIVILEGED = """
import json, sys
from ares.sandbox.docker.loopback import open_container_namespace
try:
    open_container_namespace(sys.argv[1], json.loads(sys.argv[2]))
    print("opened")
except Exception as exc:
    print(f"{type(exc).__name__}: {exc}")
"""


@pytest.mark.skipif(not can_drop(), reason=SKIP_REASON)
async def test_an_unprivileged_host_user_is_refused_clearly(
    shared_sandbox: DockerSandbox, docker_client: docker.DockerClient
) -> None:
    """A rootful engine's containers are root's: nobody may not enter their namespaces (nor, here,
    reach the engine's socket at all)."""
    sandbox = shared_sandbox
    assert sandbox.container_id is not None
    info = docker_client.api.inspect_container(sandbox.container_id)
    state = json.dumps({"State": {"Running": True, "Pid": info["State"]["Pid"]}})
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{SRC}:{sysconfig.get_paths()['purelib']}"}
    python = nobody_python() or pytest.skip(SKIP_REASON)
    cmd = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", python]
    proc = await asyncio.create_subprocess_exec(
        *cmd, "-c", UNPRIVILEGED, sandbox.container_id, state, env=env, cwd="/",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    assert out.decode().startswith(f"SandboxUnavailableError: this user (uid {NOBODY}) may not enter")
