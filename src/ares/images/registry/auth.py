"""Registry authentication: parse `WWW-Authenticate`, fetch Bearer tokens, cache them per scope.

The token flow is the distribution spec's: a 401 names a realm, the client asks the realm for a token
for `repository:NAME:pull` (with Basic credentials when it has some) and retries with `Bearer`. With a
Docker identity token the realm is asked by OAuth2 POST (`grant_type=refresh_token`) instead, and by
GET with Basic if it does not speak OAuth2 (404/405).
"""

from __future__ import annotations

import asyncio
import base64
import re
import time
from dataclasses import dataclass, field

import httpx

from ares.images.errors import ImageError
from ares.images.registry.credentials import Credentials, CredentialSource
from ares.images.registry.reference import Reference

_PARAM = re.compile(r'(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^,\s]*))')
# Tokens without `expires_in` live 60 s (distribution spec); renew a little early to avoid a 401.
_DEFAULT_TOKEN_LIFETIME = 60.0
_RENEW_MARGIN = 5.0
_CLIENT_ID = "ares"


@dataclass(frozen=True)
class Challenge:
    """One `WWW-Authenticate` challenge: the scheme (`bearer`/`basic`) and its parameters."""

    scheme: str
    params: dict[str, str] = field(default_factory=dict)


def parse_challenge(header: str) -> Challenge:
    """Parse `Bearer realm="...",service="...",scope="..."` (or `Basic realm="..."`)."""
    scheme, _, rest = header.strip().partition(" ")
    params = {m[1].lower(): (m[2] if m[2] else m[3]) for m in _PARAM.finditer(rest)}
    return Challenge(scheme.lower(), params)


def basic_header(credentials: Credentials) -> str:
    raw = f"{credentials.username}:{credentials.password}".encode()
    return "Basic " + base64.b64encode(raw).decode()


@dataclass(frozen=True)
class _Token:
    value: str
    expires_at: float


class Authenticator:
    """Keeps what each registry asked for and the tokens it granted, keyed by (endpoint, scope)."""

    def __init__(self, http: httpx.AsyncClient, credentials: CredentialSource | None) -> None:
        self._http = http
        self._credentials = credentials
        self._tokens: dict[tuple[str, str], _Token] = {}
        self._basic: dict[str, Credentials] = {}
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    def header(self, reference: Reference, scope: str) -> str | None:
        """The Authorization header to send first: a live token, known Basic credentials, or none."""
        token = self._tokens.get((reference.endpoint, scope))
        if token is not None and time.monotonic() < token.expires_at - _RENEW_MARGIN:
            return f"Bearer {token.value}"
        basic = self._basic.get(reference.endpoint)
        return basic_header(basic) if basic is not None else None

    async def answer(self, reference: Reference, scope: str, header: str | None, *, secure: bool) -> None:
        """Act on a 401's challenge so the next request carries fresh authorization."""
        if not header:
            raise ImageError(f"{reference.registry} answered 401 without a WWW-Authenticate challenge")
        challenge = parse_challenge(header)
        if challenge.scheme == "basic":
            credentials = await self._lookup(reference)
            if credentials is None:
                raise ImageError(_login_hint(reference, "requires a login"))
            self._basic[reference.endpoint] = credentials
        elif challenge.scheme == "bearer":
            key = (reference.endpoint, scope)
            lock = self._locks.setdefault(key, asyncio.Lock())
            stale = self._tokens.get(key)
            async with lock:
                if self._tokens.get(key) is stale:  # another task may have renewed it meanwhile
                    self._tokens[key] = await self._fetch_token(reference, scope, challenge, secure=secure)
        else:
            raise ImageError(f"{reference.registry} asks for unsupported auth scheme {challenge.scheme!r}")

    async def _lookup(self, reference: Reference) -> Credentials | None:
        return None if self._credentials is None else await self._credentials.get(reference)

    async def _fetch_token(
        self, reference: Reference, scope: str, challenge: Challenge, *, secure: bool
    ) -> _Token:
        realm = challenge.params.get("realm")
        if not realm:
            raise ImageError(f"{reference.registry}'s Bearer challenge names no realm (token server)")
        url = httpx.URL(realm)
        if url.scheme != "https" and secure:
            raise ImageError(
                f"{reference.registry} sends its token server {realm} over plain HTTP; refusing to send "
                "credentials in clear text (add the registry to ARES_INSECURE_REGISTRIES to allow it)"
            )
        params = {"scope": scope}
        if "service" in challenge.params:
            params["service"] = challenge.params["service"]
        credentials = await self._lookup(reference)
        try:
            response = None
            if credentials is not None and credentials.identity_token:
                form = {**params, "grant_type": "refresh_token", "client_id": _CLIENT_ID}
                form["refresh_token"] = credentials.identity_token
                response = await self._http.post(url, data=form)
                if response.status_code in (404, 405):  # no OAuth2 here: the plain token GET below
                    credentials = Credentials(
                        credentials.username, credentials.password or credentials.identity_token
                    )
                    response = None
            if response is None:
                headers = {"Authorization": basic_header(credentials)} if credentials is not None else {}
                response = await self._http.get(url, params=params, headers=headers)
        except httpx.HTTPError as exc:
            raise ImageError(f"token server {realm} for {reference.registry} is unreachable: {exc}") from exc
        if response.status_code in (401, 403):
            raise ImageError(_login_hint(reference, f"token server {realm} refused the credentials"))
        if response.status_code != 200:
            raise ImageError(f"token server {realm} answered HTTP {response.status_code} for {reference}")
        try:
            body = response.json()
            value = body.get("token") or body.get("access_token")
            lifetime = float(body.get("expires_in") or _DEFAULT_TOKEN_LIFETIME)
        except (ValueError, AttributeError, TypeError) as exc:
            raise ImageError(f"token server {realm} answered something that is not a token") from exc
        if not value:
            raise ImageError(f"token server {realm} answered without a token")
        return _Token(str(value), time.monotonic() + lifetime)

    def forget(self, reference: Reference, scope: str) -> None:
        """Drop a token the registry rejected, so the next 401 fetches a new one."""
        self._tokens.pop((reference.endpoint, scope), None)


def _login_hint(reference: Reference, what: str) -> str:
    return (
        f"{reference.registry} {what} for {reference.repository}: log in with "
        f"`podman login {reference.registry}` (or `docker login`), or point REGISTRY_AUTH_FILE at an "
        "auth.json that has credentials for it"
    )
