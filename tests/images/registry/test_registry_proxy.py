"""Misbehaving networks in front of the real registry: rate limits, redirects, broken downloads."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from oci_registry_kit import Pushed, Registry, make_client, serve, tls_context

from ares.images.errors import ImageError
from ares.images.registry import (
    DockerConfigCredentials,
    RegistryClient,
    RetryPolicy,
    fetch_layer,
    parse_reference,
    resolve,
)

Policy = Callable[[web.Request, bytes], Awaitable[web.StreamResponse | None]]
_HOP = {"transfer-encoding", "content-encoding", "content-length", "connection", "keep-alive"}


def forwarding_app(upstream: str, policy: Policy | None = None) -> tuple[web.Application, list[dict]]:
    """An HTTP proxy to `upstream` that logs each request; `policy` may answer in its place."""
    seen: list[dict] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        seen.append({"path": request.path, "headers": dict(request.headers)})
        if policy is not None and (answer := await policy(request, b"")) is not None:
            return answer
        headers = {k: v for k, v in request.headers.items() if k.lower() not in {"host", *_HOP}}
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://{upstream}{request.path_qs}", headers=headers, allow_redirects=False) as up,
        ):
            body = await up.read()
            out = {k: v for k, v in up.headers.items() if k.lower() not in _HOP}
            return web.Response(status=up.status, body=body, headers=out)

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", handle)
    return app, seen


async def pull(host: str, name: str, images: dict[str, Pushed], retry: RetryPolicy | None = None) -> None:
    async with make_client(host, **({"retry": retry} if retry else {})) as client:
        image = await resolve(client, parse_reference(f"{host}/ares/{name}:v1"))
        out: list[bytes] = []
        await fetch_layer(client, image.reference, image.layers[0], image.diff_ids[0], out.append)
        assert image.diff_ids == (images[name].diff_id,)


async def test_429_then_200_honours_retry_after(registry: Registry, images: dict[str, Pushed]) -> None:
    refused = 0

    async def limit(request: web.Request, _: bytes) -> web.StreamResponse | None:
        nonlocal refused
        if "/manifests/" in request.path and refused == 0:
            refused += 1
            return web.Response(status=429, headers={"Retry-After": "1"})
        return None

    app, seen = forwarding_app(registry.host, limit)
    async with serve(app) as host:
        start = time.monotonic()
        await pull(host, "gzip", images)
        assert time.monotonic() - start >= 0.9  # waited as told, not the policy's 10 ms
    assert [r["path"] for r in seen[:2]] == ["/v2/ares/gzip/manifests/v1"] * 2


async def test_5xx_retried_with_backoff_then_bounded(registry: Registry, images: dict[str, Pushed]) -> None:
    failures = {"n": 2}

    async def flaky(request: web.Request, _: bytes) -> web.StreamResponse | None:
        if "/blobs/" in request.path and failures["n"] > 0:
            failures["n"] -= 1
            return web.Response(status=503)
        return None

    app, _ = forwarding_app(registry.host, flaky)
    async with serve(app) as host:
        await pull(host, "zstd", images)

    async def always(request: web.Request, _: bytes) -> web.StreamResponse | None:
        return web.Response(status=429, headers={"Retry-After": "0"})

    app, seen = forwarding_app(registry.host, always)
    async with serve(app) as host:
        with pytest.raises(ImageError, match=r"rate limiting \(HTTP 429\) after retries"):
            await pull(host, "gzip", images, RetryPolicy(attempts=3, base_delay=0.01))
    assert len(seen) == 3


def test_retry_delay_is_bounded() -> None:
    policy = RetryPolicy(attempts=5, base_delay=1.0, max_delay=4.0)
    assert policy.delay(0, "120") == 4.0
    assert policy.delay(0, "2") == 2.0
    assert policy.delay(0, "Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past
    assert 0.5 <= policy.delay(1) <= 2.0
    assert policy.delay(10) == 4.0


async def test_redirect_to_another_host_drops_credentials(
    basic_registry: Registry, images: dict[str, Pushed]
) -> None:
    """Blob GETs are 307-redirected to a "storage" host (127.0.0.2) that must never see the password."""
    storage_seen: list[dict] = []
    basic = base64.b64encode(":".join(basic_registry.creds).encode()).decode()  # type: ignore[arg-type]
    auth = {"Authorization": f"Basic {basic}"}

    async def storage(request: web.Request) -> web.StreamResponse:
        storage_seen.append(dict(request.headers))
        async with (
            aiohttp.ClientSession(headers=auth) as session,
            session.get(f"http://{basic_registry.host}/v2/{request.match_info['tail']}") as up,
        ):
            return web.Response(status=up.status, body=await up.read())

    storage_app = web.Application()
    storage_app.router.add_get("/{tail:.*}", storage)
    async with serve(storage_app, host="127.0.0.2") as storage_host:

        async def redirect(request: web.Request, _: bytes) -> web.StreamResponse | None:
            if "/blobs/" in request.path:
                tail = request.path.removeprefix("/v2/")
                raise web.HTTPTemporaryRedirect(f"http://{storage_host}/{tail}?X-Signed=abc")
            return None

        app, seen = forwarding_app(basic_registry.host, redirect)
        async with serve(app) as host:
            config = basic_registry.root.parent / "redirect-auth.json"
            config.write_text(json.dumps({"auths": {host: {"auth": basic}}}))
            async with make_client(host, auth_files=[config]) as client:
                image = await resolve(client, parse_reference(f"{host}/ares/gzip:v1"))
                out: list[bytes] = []
                await fetch_layer(client, image.reference, image.layers[0], image.diff_ids[0], out.append)
    assert any("Authorization" in r["headers"] for r in seen)  # the registry did get credentials
    assert len(storage_seen) == 2  # config and layer
    assert all("Authorization" not in h for h in storage_seen)


async def test_tls_by_default_and_no_downgrade_on_redirect(
    registry: Registry, images: dict[str, Pushed], tmp_path: Path
) -> None:
    """A registry not listed as insecure is spoken to over verified TLS; redirects may not leave TLS."""
    server_tls, client_tls = tls_context(tmp_path)

    async def downgrade(request: web.Request, _: bytes) -> web.StreamResponse | None:
        if "/blobs/" in request.path:
            raise web.HTTPTemporaryRedirect(f"http://{registry.host}{request.path}")
        return None

    app, _ = forwarding_app(registry.host)
    async with serve(app, tls=server_tls) as host:
        async with RegistryClient(credentials=DockerConfigCredentials([]), verify=client_tls) as client:
            image = await resolve(client, parse_reference(f"{host}/ares/gzip:v1"))
            assert image.diff_ids == (images["gzip"].diff_id,)
        async with RegistryClient(credentials=DockerConfigCredentials([]), retry=RetryPolicy(1)) as client:
            with pytest.raises(ImageError, match="CERTIFICATE_VERIFY_FAILED"):  # the machine's CAs only
                await resolve(client, parse_reference(f"{host}/ares/gzip:v1"))
    app, _ = forwarding_app(registry.host, downgrade)
    async with (
        serve(app, tls=server_tls) as host,
        RegistryClient(credentials=DockerConfigCredentials([]), verify=client_tls) as client,
    ):
        with pytest.raises(ImageError, match="would drop TLS; refusing"):
            await resolve(client, parse_reference(f"{host}/ares/gzip:v1"))


@pytest.mark.parametrize("honour_range", [True, False], ids=["range", "no-range"])
async def test_broken_download_resumes(
    registry: Registry, images: dict[str, Pushed], honour_range: bool
) -> None:
    broken: set[str] = set()

    async def break_once(request: web.Request, _: bytes) -> web.StreamResponse | None:
        if "/blobs/" not in request.path:
            return None
        if request.path not in broken:
            broken.add(request.path)
            async with (
                aiohttp.ClientSession() as session,
                session.get(f"http://{registry.host}{request.path}") as up,
            ):
                body = await up.read()
            response = web.StreamResponse(headers={"Content-Length": str(len(body))})
            await response.prepare(request)
            await response.write(body[: len(body) // 2])
            assert request.transport is not None
            request.transport.close()  # mid-body: the client sees a truncated stream
            return response
        if not honour_range and "Range" in request.headers:
            async with (
                aiohttp.ClientSession() as session,
                session.get(f"http://{registry.host}{request.path}") as up,
            ):
                return web.Response(status=200, body=await up.read())
        return None

    app, seen = forwarding_app(registry.host, break_once)
    async with serve(app) as host:
        await pull(host, "v2s2", images)
    ranges = [r["headers"].get("Range") for r in seen if "/blobs/" in r["path"]]
    # The config (small, read whole) is fetched again from the start; the layer resumes where it broke.
    assert ranges[:3] == [None, None, None] and len(ranges) == 4
    assert ranges[3] is not None and ranges[3].startswith("bytes=") and ranges[3] != "bytes=0-"
