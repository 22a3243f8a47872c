"""HTTP to a registry: auth on 401, retries with backoff, and redirects that never leak credentials.

Redirects are followed here rather than by httpx so the Authorization header can be dropped the moment
a hop leaves the registry's origin (blob downloads are often redirected to a storage host).
"""

from __future__ import annotations

import asyncio
import email.utils
import os
import random
import ssl
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx

from ares.images.errors import ImageError
from ares.images.registry.auth import Authenticator
from ares.images.registry.credentials import CredentialSource, DockerConfigCredentials
from ares.images.registry.reference import Reference

INSECURE_ENV = "ARES_INSECURE_REGISTRIES"
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
    """Registries (`host:port`) named in ARES_INSECURE_REGISTRIES; only these are spoken to over HTTP."""
    raw = (os.environ if env is None else env).get(INSECURE_ENV, "")
    return frozenset(part.strip() for part in raw.split(",") if part.strip())


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
    ) -> None:
        """`verify` may be an SSLContext trusting a private registry's CA; False is never the default."""
        self._http = httpx.AsyncClient(
            timeout=timeout or httpx.Timeout(60.0, connect=15.0), follow_redirects=False, verify=verify
        )
        self._auth = Authenticator(self._http, credentials or DockerConfigCredentials())
        self._insecure = insecure_registries() if insecure is None else frozenset(insecure)
        self.retry = retry or RetryPolicy()

    async def __aenter__(self) -> RegistryClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    def is_insecure(self, reference: Reference) -> bool:
        return reference.registry in self._insecure or reference.endpoint in self._insecure

    def url(self, reference: Reference, path: str) -> httpx.URL:
        scheme = "http" if self.is_insecure(reference) else "https"
        return httpx.URL(f"{scheme}://{reference.endpoint}/v2/{reference.repository}/{path}")

    async def get(
        self, reference: Reference, path: str, headers: Mapping[str, str] | None = None
    ) -> httpx.Response:
        """GET with the body read (again, if the connection breaks midway); ImageError unless 2xx."""
        for attempt in range(self.retry.attempts):
            try:
                async with self.stream(reference, path, headers) as response:
                    await response.aread()
                    return response
            except httpx.TransportError as exc:
                if attempt + 1 >= self.retry.attempts:
                    raise ImageError(
                        f"{reference} ({path}): the connection to {reference.registry} broke {attempt + 1} "
                        f"times while reading ({exc!r}); check the network and retry"
                    ) from exc
                await asyncio.sleep(self.retry.delay(attempt))
        raise AssertionError("unreachable")

    @asynccontextmanager
    async def stream(
        self, reference: Reference, path: str, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[httpx.Response]:
        """GET a registry path and yield the 2xx response unread, for streaming its body."""
        response = await self._send(reference, path, dict(headers or {}))
        try:
            yield response
        finally:
            await response.aclose()

    async def _send(self, reference: Reference, path: str, headers: dict[str, str]) -> httpx.Response:
        scope = f"repository:{reference.repository}:pull"
        url = self.url(reference, path)
        reauthenticated = False
        attempt = 0
        while True:
            auth = self._auth.header(reference, scope)
            sent = {**headers, **({"Authorization": auth} if auth else {})}
            try:
                response = await self._follow(url, sent)
            except httpx.TransportError as exc:
                if attempt + 1 >= self.retry.attempts:
                    raise ImageError(
                        f"cannot reach {reference.registry} for {reference}: {exc!r}; check the network "
                        f"(and, for a plain-HTTP registry, that it is listed in {INSECURE_ENV})"
                    ) from exc
                await asyncio.sleep(self.retry.delay(attempt))
                attempt += 1
                continue
            if response.status_code == 401 and not reauthenticated:
                challenge = response.headers.get("www-authenticate")
                await response.aclose()
                if auth and auth.startswith("Bearer "):
                    self._auth.forget(reference, scope)
                await self._auth.answer(reference, scope, challenge, secure=not self.is_insecure(reference))
                reauthenticated = True
                continue
            if response.status_code in _RETRYABLE and attempt + 1 < self.retry.attempts:
                delay = self.retry.delay(attempt, response.headers.get("retry-after"))
                await response.aclose()
                await asyncio.sleep(delay)
                attempt += 1
                continue
            if response.is_success:
                return response
            await response.aread()
            await response.aclose()
            raise ImageError(_status_message(reference, path, response))

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
