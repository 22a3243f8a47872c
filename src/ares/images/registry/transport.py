"""HTTP to a registry: auth on 401, retries with backoff, and redirects that never leak credentials.

Redirects are followed here rather than by httpx so the Authorization header can be dropped the moment
a hop leaves the registry's origin (blob downloads are often redirected to a storage host). Mirrors are
tried through `first_available`: each endpoint is spoken to with the reference rewritten for it, so
auth state and credentials are always those of the host actually contacted.
"""

from __future__ import annotations

import asyncio
import email.utils
import os
import random
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TypeVar

import httpx

from ares.images.errors import ImageError
from ares.images.registry.auth import Authenticator
from ares.images.registry.config import INSECURE_ENV, Endpoint, RegistryConfig, parse_insecure
from ares.images.registry.credentials import CredentialSource, DockerConfigCredentials
from ares.images.registry.limits import Limits
from ares.images.registry.reference import Reference

T = TypeVar("T")
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_RETRYABLE = frozenset({429, 500, 502, 503, 504})
_MAX_REDIRECTS = 5


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded exponential backoff with jitter; a server's Retry-After wins but is capped too."""

    attempts: int = 5
    base_delay: float = 0.5
    max_delay: float = 30.0

    def delay(self, attempt: int, retry_after: str | None = None) -> float:
        wanted = _parse_retry_after(retry_after)
        if wanted is None:
            wanted = self.base_delay * (2**attempt) * (0.5 + random.random() / 2)
        return max(0.0, min(wanted, self.max_delay))


def _parse_retry_after(value: str | None) -> float | None:
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return when.timestamp() - time.time()


def insecure_registries(env: Mapping[str, str] | None = None) -> frozenset[str]:
    """Registries (`host:port`) named in ARES_INSECURE_REGISTRIES (the config file may name more)."""
    return frozenset(parse_insecure((os.environ if env is None else env).get(INSECURE_ENV, "")))


class EndpointUnavailable(ImageError):
    """This host could not serve the request (network, HTTP status, auth): the next mirror may."""


class RegistryClient:
    """One httpx.AsyncClient shared by every request, with per-registry auth state."""

    def __init__(
        self,
        *,
        credentials: CredentialSource | None = None,
        insecure: Iterable[str] | None = None,
        retry: RetryPolicy | None = None,
        timeout: httpx.Timeout | None = None,
        verify: ssl.SSLContext | bool = True,
        config: RegistryConfig | None = None,
        limits: Limits | None = None,
    ) -> None:
        """`verify` may be an SSLContext trusting a private registry's CA; False is never the default.

        `config` defaults to `RegistryConfig.load()` (environment and files); `insecure`, when given,
        replaces its set of plain-HTTP hosts.
        """
        self._http = httpx.AsyncClient(
            timeout=timeout or httpx.Timeout(60.0, connect=15.0), follow_redirects=False, verify=verify
        )
        self._auth = Authenticator(self._http, credentials or DockerConfigCredentials())
        config = RegistryConfig.load() if config is None else config
        self.config = config if insecure is None else config.with_insecure(insecure)
        self.limits = limits or Limits()
        self.retry = retry or RetryPolicy()
        self._served_by: dict[str, str] = {}  # logical name -> the endpoint name that last served it

    async def __aenter__(self) -> RegistryClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    def is_insecure(self, reference: Reference) -> bool:
        return self.config.is_insecure(reference)

    def endpoints(self, reference: Reference) -> tuple[Endpoint, ...]:
        """Where to try `reference`: mirrors then its location, the one that last served it first."""
        found = self.config.endpoints(reference)
        served = self._served_by.get(reference.name)
        return tuple(sorted(found, key=lambda e: e.reference.name != served))

    async def first_available(
        self, reference: Reference, attempt: Callable[[Reference, bool], Awaitable[T]]
    ) -> T:
        """Run `attempt(endpoint_reference, last)` on each endpoint until one does not raise
        EndpointUnavailable; other errors (a digest mismatch) propagate at once."""
        endpoints = self.endpoints(reference)
        failed: list[str] = []
        for i, endpoint in enumerate(endpoints):
            last = i + 1 == len(endpoints)
            try:
                result = await attempt(endpoint.reference, last)
            except EndpointUnavailable as exc:
                if last:
                    if failed:
                        raise EndpointUnavailable(f"{exc} (tried before it: {'; '.join(failed)})") from exc
                    raise
                failed.append(f"{endpoint.reference.registry}: {exc}")
                continue
            self._served_by[reference.name] = endpoint.reference.name
            return result
        raise AssertionError("no endpoints")

    def url(self, reference: Reference, path: str) -> httpx.URL:
        scheme = "http" if self.is_insecure(reference) else "https"
        return httpx.URL(f"{scheme}://{reference.endpoint}/v2/{reference.repository}/{path}")

    async def get(
        self,
        reference: Reference,
        path: str,
        headers: Mapping[str, str] | None = None,
        *,
        limit: int | None = None,
        fail_fast: bool = False,
    ) -> httpx.Response:
        """GET with the body read (again, if the connection breaks midway); ImageError unless 2xx.

        A body over `limit` bytes is refused from its Content-Length, or as soon as it grows past it.
        `fail_fast` gives up after one try (another endpoint is next).
        """
        attempts = 1 if fail_fast else self.retry.attempts
        for attempt in range(attempts):
            try:
                async with self.stream(reference, path, headers, fail_fast=fail_fast) as response:
                    await _read_capped(response, reference, path, limit)
                    return response
            except httpx.TransportError as exc:
                if attempt + 1 >= attempts:
                    raise EndpointUnavailable(
                        f"{reference} ({path}): the connection to {reference.registry} broke {attempt + 1} "
                        f"times while reading ({exc!r}); check the network and retry"
                    ) from exc
                await asyncio.sleep(self.retry.delay(attempt))
        raise AssertionError("unreachable")

    @asynccontextmanager
    async def stream(
        self,
        reference: Reference,
        path: str,
        headers: Mapping[str, str] | None = None,
        *,
        fail_fast: bool = False,
    ) -> AsyncIterator[httpx.Response]:
        """GET a registry path and yield the 2xx response unread, for streaming its body."""
        response = await self._send(reference, path, dict(headers or {}), fail_fast)
        try:
            yield response
        finally:
            await response.aclose()

    async def _send(
        self, reference: Reference, path: str, headers: dict[str, str], fail_fast: bool = False
    ) -> httpx.Response:
        scope = f"repository:{reference.repository}:pull"
        url = self.url(reference, path)
        attempts = 1 if fail_fast else self.retry.attempts
        reauthenticated = False
        attempt = 0
        while True:
            auth = self._auth.header(reference, scope)
            sent = {**headers, **({"Authorization": auth} if auth else {})}
            try:
                response = await self._follow(url, sent)
            except httpx.TransportError as exc:
                if attempt + 1 >= attempts:
                    raise EndpointUnavailable(_unreachable(reference, url, exc)) from exc
                await asyncio.sleep(self.retry.delay(attempt))
                attempt += 1
                continue
            if response.status_code == 401 and not reauthenticated:
                challenge = response.headers.get("www-authenticate")
                await response.aclose()
                if auth and auth.startswith("Bearer "):
                    self._auth.forget(reference, scope)
                try:
                    await self._auth.answer(
                        reference, scope, challenge, secure=not self.is_insecure(reference)
                    )
                except EndpointUnavailable:
                    raise
                except ImageError as exc:  # no login for this host: a mirror may still be skipped
                    raise EndpointUnavailable(str(exc)) from exc
                reauthenticated = True
                continue
            if response.status_code in _RETRYABLE and attempt + 1 < attempts:
                delay = self.retry.delay(attempt, response.headers.get("retry-after"))
                await response.aclose()
                await asyncio.sleep(delay)
                attempt += 1
                continue
            if response.is_success:
                return response
            try:
                await _read_capped(response, reference, path, 64 * 1024)
            except ImageError:
                pass
            finally:
                await response.aclose()
            raise EndpointUnavailable(_status_message(reference, path, response))

    async def _follow(self, url: httpx.URL, headers: dict[str, str]) -> httpx.Response:
        """Send, following redirects ourselves; Authorization never leaves the registry's origin."""
        origin = (url.scheme, url.host, url.port)
        for _ in range(_MAX_REDIRECTS + 1):
            request = self._http.build_request("GET", url, headers=headers)
            response = await self._http.send(request, stream=True)
            location = response.headers.get("location")
            if response.status_code not in _REDIRECTS or not location:
                return response
            await response.aclose()
            target = url.join(location)
            if target.scheme not in ("http", "https") or (target.scheme == "http" and origin[0] == "https"):
                raise ImageError(f"{url.host} redirected to {target}, which would drop TLS; refusing")
            if (target.scheme, target.host, target.port) != origin:
                headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
            url = target
        raise ImageError(f"{url.host} redirected more than {_MAX_REDIRECTS} times; giving up")


async def _read_capped(response: httpx.Response, reference: Reference, path: str, limit: int | None) -> bytes:
    """The body, refused once it is known (Content-Length) or seen to exceed `limit` bytes."""
    declared = response.headers.get("content-length", "")
    if limit is not None and declared.isdigit() and int(declared) > limit:
        raise ImageError(
            f"{reference} ({path}): {reference.registry} announces {declared} bytes, over the {limit}-byte "
            "cap for this kind of document; refusing to read it (a broken or hostile registry)"
        )
    parts: list[bytes] = []
    total = 0
    async for chunk in response.aiter_bytes():
        total += len(chunk)
        if limit is not None and total > limit:
            raise ImageError(
                f"{reference} ({path}): {reference.registry} sent more than the {limit}-byte cap for this "
                "kind of document; refusing it (a broken or hostile registry)"
            )
        parts.append(chunk)
    body = b"".join(parts)
    response._content = body  # so .content and .json() work on the capped body
    return body


def _unreachable(reference: Reference, url: httpx.URL, exc: httpx.TransportError) -> str:
    text = repr(exc)
    if url.scheme == "https" and any(
        s in text for s in ("WRONG_VERSION_NUMBER", "record layer", "HTTP_REQUEST")
    ):
        return (
            f"cannot speak TLS to {reference.registry} for {reference}: it seems to serve plain HTTP "
            f"({text}); if that is intended, name it in {INSECURE_ENV}=host:port (or insecure = true in "
            "registries.conf)"
        )
    return (
        f"cannot reach {reference.registry} for {reference}: {text}; check the network "
        f"(and, for a plain-HTTP registry, that it is listed in {INSECURE_ENV})"
    )


def _status_message(reference: Reference, path: str, response: httpx.Response) -> str:
    detail = ""
    try:
        errors = response.json().get("errors") or []
        detail = "; ".join(f"{e.get('code')}: {e.get('message')}" for e in errors if isinstance(e, dict))
    except (ValueError, AttributeError):
        pass
    what = f"{reference} ({path})"
    status = response.status_code
    suffix = f" [{detail}]" if detail else ""
    if status == 404:
        return f"{what}: not found on {reference.registry} (HTTP 404){suffix}; check the name, tag and digest"
    if status in (401, 403):
        return (
            f"{what}: access denied by {reference.registry} (HTTP {status}){suffix}; log in with "
            f"`podman login {reference.registry}` or check that the credentials may pull this repository"
        )
    if status == 429:
        return f"{what}: {reference.registry} is rate limiting (HTTP 429) after retries; log in or try later"
    return f"{what}: {reference.registry} answered HTTP {status}{suffix}"
