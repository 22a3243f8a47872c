"""A fake E2B (control-plane API and the envd daemon of each sandbox) as an in-process ASGI app.

The E2B SDK under test is unmodified down to its HTTP transport: its REST client, its envd HTTP
client and its Connect RPC clients all send real requests through pyqwest's ``ASGITransport`` to
this app, which parses them with the SDK's own models (``NewSandboxV2``, the envd protobuf
messages) and answers with them. The process service is served by the SDK's generated
``ProcessASGIApplication``.

Each sandbox is a ``Machine`` (see cloud_fake_machine.py) made from the create request: its
``env_vars`` and ``allow_internet_access`` become the machine's ``SandboxSpec``; the template is not
built, every machine has its default filesystem. Machines are in memory unless the service is given
``machine_factory=local_machine``, which makes every sandbox a real local sandbox. envd runs a
command (``/bin/bash -l -c CMD``) as the request's user, kills it at the stream's deadline and on a
SIGKILL; stdin sent to a command is collected until it is closed, then the command runs with it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import posixpath
import shlex
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any, Self
from urllib.parse import parse_qs

import e2b.api.client_async as api_clients
import e2b.envd.client_async as envd_clients
import pytest
from cloud_fake_machine import HOME, Machine, MachineFactory, Outcome, memory_machine
from connectrpc.code import Code
from connectrpc.errors import ConnectError
from connectrpc.request import RequestContext
from e2b.api.client.models import NewSandboxV2
from e2b.api.client.models import Sandbox as SandboxModel
from e2b.envd.client_shared import ENVD_JSON_CODEC
from e2b.envd.process import process_connect, process_pb
from protobuf import Oneof
from pyqwest.testing import ASGITransport

from ares.errors import SandboxError
from ares.sandbox import SandboxSpec

API_KEY = "e2b_test_key"
ENVD_VERSION = "0.6.9"

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


@dataclass
class StartedProcess:
    """What a Start request asked for, and what became of it."""

    request: process_pb.StartRequest
    user: str
    machine: Machine
    key: str
    stdin: bytearray = field(default_factory=bytearray)
    stdin_closed: asyncio.Event = field(default_factory=asyncio.Event)
    killed: asyncio.Event = field(default_factory=asyncio.Event)
    ended: bool = False


def machine_spec(request: NewSandboxV2) -> SandboxSpec:
    """The sandbox a create request asks for, as a spec for its machine (online unless told not to be)."""
    online = request.allow_internet_access
    return SandboxSpec(
        network=online if isinstance(online, bool) else True,
        env=dict(request.env_vars or {}),
        workdir=HOME,
    )


@dataclass
class FakeE2B:
    """The fake service; enter it (``async with FakeE2B() as fake``) to stop its machines at the end."""

    machine_factory: MachineFactory = memory_machine
    machines: dict[str, Machine] = field(default_factory=dict)
    created: list[NewSandboxV2] = field(default_factory=list)
    #: The spec each created sandbox's machine was made from, in creation order.
    specs: list[SandboxSpec] = field(default_factory=list)
    killed_sandboxes: list[str] = field(default_factory=list)
    processes: dict[int, StartedProcess] = field(default_factory=dict)
    file_users: list[str] = field(default_factory=list)
    #: (pid, signal) of every SendSignal request.
    signals: list[tuple[int, int]] = field(default_factory=list)
    #: Answer creates with this (HTTP status, message) instead of a sandbox.
    fail_create: tuple[int, str] | None = None
    #: A wedged envd: it starts commands but neither kills them at their deadline nor reports their
    #: end; only a kill ends them.
    hang_exec: bool = False

    def __post_init__(self) -> None:
        self._rpc = process_connect.ProcessASGIApplication(_Processes(self), codecs=[ENVD_JSON_CODEC])

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        while self.machines:
            await self.machines.popitem()[1].stop()

    async def vanish(self, sandbox_id: str) -> None:
        """The sandbox disappears behind the client's back (killed elsewhere, or timed out)."""
        await self.machines.pop(sandbox_id).stop()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        path, method = scope["path"], scope["method"]
        if headers.get("host", "").startswith("api."):
            await self._api(method, path, headers, receive, send)
            return
        if headers.get("e2b-sandbox-id") not in self.machines:  # the edge proxy answers for envd
            message = f"The sandbox {headers.get('e2b-sandbox-id')} was not found"
            await _respond(send, 502, json.dumps({"code": 502, "message": message}).encode())
        elif path.startswith("/process.Process/"):
            await self._rpc(scope, receive, send)  # type: ignore[arg-type]
        elif path == "/files":
            await self._files(method, scope, headers, receive, send)
        elif path == "/health":
            await _respond(send, 204, b"")
        else:
            await _respond(send, 404, b'{"code": 404, "message": "not found"}')

    # ------------------------------------------------------------------ control plane
    async def _api(
        self, method: str, path: str, headers: dict[str, str], receive: Receive, send: Send
    ) -> None:
        if headers.get("x-api-key") != API_KEY:
            await _respond(send, 401, b'{"code": 401, "message": "Invalid API key"}')
        elif method == "POST" and path == "/v2/sandboxes":
            await self._create(await _body(receive), send)
        elif method == "DELETE" and path.startswith("/sandboxes/"):
            sandbox_id = path.removeprefix("/sandboxes/")
            machine = self.machines.pop(sandbox_id, None)
            if machine is None:
                await _respond(send, 404, json.dumps({"code": 404, "message": "sandbox not found"}).encode())
            else:
                await machine.stop()
                self.killed_sandboxes.append(sandbox_id)
                await _respond(send, 204, b"")
        else:
            await _respond(send, 404, b'{"code": 404, "message": "not found"}')

    async def _create(self, body: bytes, send: Send) -> None:
        if self.fail_create is not None:
            status, message = self.fail_create
            await _respond(send, status, json.dumps({"code": status, "message": message}).encode())
            return
        request = NewSandboxV2.from_dict(json.loads(body))
        self.created.append(request)
        spec = machine_spec(request)
        self.specs.append(spec)
        try:
            machine = await self.machine_factory(spec)
        except SandboxError as exc:
            message = f"cannot start the sandbox: {exc}"
            await _respond(send, 500, json.dumps({"code": 500, "message": message}).encode())
            return
        sandbox_id = uuid.uuid4().hex[:20]
        self.machines[sandbox_id] = machine
        sandbox = SandboxModel(
            template_id=request.template_id,
            sandbox_id=sandbox_id,
            client_id="client",
            envd_version=ENVD_VERSION,
            envd_access_token="envd-token",
        )
        await _respond(send, 201, json.dumps(sandbox.to_dict()).encode())

    # ------------------------------------------------------------------ envd files
    async def _files(
        self, method: str, scope: Scope, headers: dict[str, str], receive: Receive, send: Send
    ) -> None:
        machine = self.machines[headers["e2b-sandbox-id"]]
        query = {k: v[0] for k, v in parse_qs(scope["query_string"].decode()).items()}
        path = query["path"]
        self.file_users.append(query.get("username", ""))
        if method == "POST":
            try:
                await machine.write(path, await _body(receive))
            except OSError as exc:
                await _respond(send, 400, json.dumps({"code": 400, "message": str(exc)}).encode())
                return
            info = [{"name": posixpath.basename(path), "type": "file", "path": path}]
            await _respond(send, 200, json.dumps(info).encode())
            return
        try:
            data = await machine.read(path)
        except FileNotFoundError:
            error = {"code": 404, "message": f"path '{path}' does not exist"}
        except OSError as exc:
            error = {"code": 400, "message": f"cannot read '{path}': {exc}"}
        else:
            await _respond(send, 200, data, "application/octet-stream")
            return
        await _respond(send, error["code"], json.dumps(error).encode())


class _Processes(process_connect.Process):
    """envd's process service over the fake's machines."""

    def __init__(self, fake: FakeE2B) -> None:
        self._fake = fake
        self._next_pid = 1000

    async def start(
        self, request: process_pb.StartRequest, ctx: RequestContext[Any, Any]
    ) -> AsyncIterator[process_pb.StartResponse]:
        fake = self._fake
        machine = fake.machines[ctx.request_headers["e2b-sandbox-id"]]
        config = request.process
        assert config.cmd == "/bin/bash" and list(config.args[:2]) == ["-l", "-c"], "envd runs bash -l -c"
        cwd = config.cwd or HOME
        if not await machine.is_dir(cwd):
            raise ConnectError(Code.INVALID_ARGUMENT, f"error starting process: chdir {cwd}: no such file")
        self._next_pid += 1
        pid = self._next_pid
        user = _user(ctx.request_headers.get("authorization", ""))
        process = StartedProcess(request, user, machine, key=str(pid))
        fake.processes[pid] = process
        run: asyncio.Task[Outcome] | None = None
        try:
            yield _event("start", process_pb.ProcessEvent.StartEvent(pid=pid))
            if request.stdin:
                await process.stdin_closed.wait()  # a kill closes it too
            if not process.killed.is_set():
                deadline = None if ctx.timeout_ms is None else max(ctx.timeout_ms / 1000, 0.001)
                run = asyncio.create_task(
                    machine.run(
                        shlex.join([config.cmd, *config.args]),
                        cwd=cwd,
                        env=dict(config.envs),
                        stdin=bytes(process.stdin) if request.stdin else None,
                        timeout_s=None if fake.hang_exec else deadline,
                        user=user or None,
                        key=process.key,
                    )
                )
                if fake.hang_exec:
                    await process.killed.wait()
                try:
                    outcome = await asyncio.shield(run)  # a cancelled stream must not cancel the command
                except SandboxError as exc:  # the machine died under the command (or was killed)
                    raise ConnectError(Code.UNAVAILABLE, f"the sandbox is gone: {exc}") from exc
                if outcome.timed_out:
                    process.killed.set()
            if process.killed.is_set():
                yield _event("end", process_pb.ProcessEvent.EndEvent(exit_code=-1, status="signal: killed"))
                return
            if outcome.stdout:
                yield _event(
                    "data", process_pb.ProcessEvent.DataEvent(output=Oneof("stdout", outcome.stdout))
                )
            if outcome.stderr:
                yield _event(
                    "data", process_pb.ProcessEvent.DataEvent(output=Oneof("stderr", outcome.stderr))
                )
            end = process_pb.ProcessEvent.EndEvent(
                exit_code=outcome.exit_code, exited=True, status=f"exit status {outcome.exit_code}"
            )
            yield _event("end", end)
        finally:
            process.ended = True
            if run is not None and not run.done():  # the client went away: envd kills the command
                process.killed.set()
                await machine.kill(process.key)
                with contextlib.suppress(Exception):
                    await run
            elif run is not None and _timed_out(run):
                # The deadline killed it just as the client went away (the client's timer and the
                # machine's fire together; since Python 3.12's wait_for, the machine's may win).
                process.killed.set()

    async def send_input(
        self, request: process_pb.SendInputRequest, ctx: RequestContext[Any, Any]
    ) -> process_pb.SendInputResponse:
        self._process(request.process).stdin.extend(request.input.input.value)
        return process_pb.SendInputResponse()

    async def close_stdin(
        self, request: process_pb.CloseStdinRequest, ctx: RequestContext[Any, Any]
    ) -> process_pb.CloseStdinResponse:
        self._process(request.process).stdin_closed.set()
        return process_pb.CloseStdinResponse()

    async def send_signal(
        self, request: process_pb.SendSignalRequest, ctx: RequestContext[Any, Any]
    ) -> process_pb.SendSignalResponse:
        process = self._process(request.process)
        self._fake.signals.append((request.process.selector.value, int(request.signal)))  # type: ignore[union-attr]
        if process.killed.is_set() or process.ended:
            raise ConnectError(Code.NOT_FOUND, "process not found")
        process.killed.set()
        process.stdin_closed.set()
        await process.machine.kill(process.key)
        return process_pb.SendSignalResponse()

    def _process(self, selector: process_pb.ProcessSelector | None) -> StartedProcess:
        assert selector is not None and selector.selector is not None
        process = self._fake.processes.get(selector.selector.value)
        if process is None:
            raise ConnectError(Code.NOT_FOUND, "process not found")
        return process


def _event(kind: str, value: Any) -> process_pb.StartResponse:
    return process_pb.StartResponse(event=process_pb.ProcessEvent(event=Oneof(kind, value)))


def _user(authorization: str) -> str:
    return (
        base64.b64decode(authorization.removeprefix("Basic ")).decode().rstrip(":") if authorization else ""
    )


async def _body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def _respond(send: Send, status: int, body: bytes, content_type: str = "application/json") -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", content_type.encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


def route_sdk_through(fake: FakeE2B, monkeypatch: pytest.MonkeyPatch) -> None:
    """Give every E2B SDK client (REST, envd HTTP, envd RPC) a transport that calls ``fake``."""
    transport = ASGITransport(fake)

    def get_transport(*args: object, **kwargs: object) -> ASGITransport:
        return transport

    monkeypatch.setattr(api_clients, "get_pyqwest_transport", get_transport)
    monkeypatch.setattr(envd_clients, "get_pyqwest_transport", get_transport)
    monkeypatch.setattr(api_clients, "_httpx_transports", {})  # adapters cached over the real pools


def _timed_out(run: asyncio.Task[Outcome]) -> bool:
    """Whether ``run`` ended with the machine killing the command at its deadline."""
    return not run.cancelled() and run.exception() is None and run.result().timed_out
