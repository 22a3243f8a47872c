"""Basic credentials from auth files and credential helpers, and Bearer tokens from a token server."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from oci_registry_kit import (
    PASSWORD,
    USER,
    Pushed,
    Registry,
    make_client,
    serve,
    start_registry,
)

from ares.images.errors import ImageError
from ares.images.registry import fetch_layer, parse_reference, resolve
from ares.images.registry.credentials import DockerConfigCredentials, default_auth_files

IDENTITY_TOKEN = "refresh-7f3a"


def write_config(path: Path, host: str, entry: dict[str, object], **extra: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"auths": {host: entry}, **extra}))
    return path


def b64(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode()


async def pull(files: list[Path], host: str, images: dict[str, Pushed]) -> None:
    async with make_client(host, auth_files=files) as client:
        image = await resolve(client, parse_reference(f"{host}/ares/gzip:v1"))
        out: list[bytes] = []
        await fetch_layer(client, image.reference, image.layers[0], image.diff_ids[0], out.append)
        assert image.diff_ids == (images["gzip"].diff_id,)


async def test_anonymous_pull_of_a_protected_registry_says_how_to_log_in(
    basic_registry: Registry, images: dict[str, Pushed]
) -> None:
    with pytest.raises(ImageError, match=f"podman login {basic_registry.host}"):
        await pull([], basic_registry.host, images)


@pytest.mark.parametrize(
    "entry",
    [{"auth": b64(USER, PASSWORD)}, {"username": USER, "password": PASSWORD}],
    ids=["base64-auth", "username-password"],
)
async def test_basic_auth_from_docker_config(
    basic_registry: Registry, images: dict[str, Pushed], tmp_path: Path, entry: dict[str, object]
) -> None:
    config = write_config(tmp_path / ".docker/config.json", f"http://{basic_registry.host}", entry)
    await pull([config], basic_registry.host, images)


async def test_most_specific_auth_entry_wins(
    basic_registry: Registry, images: dict[str, Pushed], tmp_path: Path
) -> None:
    config = tmp_path / "auth.json"
    config.write_text(
        json.dumps(
            {
                "auths": {
                    basic_registry.host: {"auth": b64(USER, "wrong")},
                    f"{basic_registry.host}/ares": {"auth": b64(USER, PASSWORD)},
                }
            }
        )
    )
    await pull([config], basic_registry.host, images)


async def test_rejected_password_is_reported(
    basic_registry: Registry, images: dict[str, Pushed], tmp_path: Path
) -> None:
    config = write_config(tmp_path / "auth.json", basic_registry.host, {"auth": b64(USER, "wrong")})
    with pytest.raises(ImageError, match=r"access denied .*HTTP 401"):
        await pull([config], basic_registry.host, images)


async def test_first_auth_file_that_knows_the_registry_wins(
    basic_registry: Registry, images: dict[str, Pushed], tmp_path: Path
) -> None:
    other = write_config(tmp_path / "a.json", "quay.io", {"auth": b64("x", "y")})
    good = write_config(tmp_path / "b.json", basic_registry.host, {"auth": b64(USER, PASSWORD)})
    bad = write_config(tmp_path / "c.json", basic_registry.host, {"auth": b64(USER, "wrong")})
    await pull([tmp_path / "missing.json", other, good, bad], basic_registry.host, images)


def test_auth_file_order(tmp_path: Path) -> None:
    env = {"REGISTRY_AUTH_FILE": "/r.json", "XDG_RUNTIME_DIR": "/run/u", "DOCKER_CONFIG": "/d"}
    assert default_auth_files(env) == [
        Path("/r.json"),
        Path("/run/u/containers/auth.json"),
        Path("/d/config.json"),
    ]
    assert default_auth_files({})[-1] == Path.home() / ".docker/config.json"


@pytest.fixture
def helper_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, basic_registry: Registry
) -> Iterator[Path]:
    """`docker-credential-arestest`: knows the Basic registry only, logs each server it is asked for."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "helper.log"
    helper = bindir / "docker-credential-arestest"
    helper.write_text(
        "#!/bin/sh\n"
        '[ "$1" = get ] || exit 2\n'
        "read -r server\n"
        f'echo "$server" >> {log}\n'
        f'if [ "$server" = "{basic_registry.host}" ]; then\n'
        f'  echo \'{{"ServerURL": "{basic_registry.host}", "Username": "{USER}", "Secret": "{PASSWORD}"}}\'\n'
        "else echo 'credentials not found in native keychain'; exit 1; fi\n"
    )
    helper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    yield log


@pytest.mark.parametrize("kind", ["credHelpers", "credsStore"])
async def test_credential_helper(
    basic_registry: Registry, images: dict[str, Pushed], tmp_path: Path, helper_on_path: Path, kind: str
) -> None:
    config = tmp_path / "config.json"
    value = {basic_registry.host: "arestest"} if kind == "credHelpers" else "arestest"
    config.write_text(json.dumps({kind: value}))
    await pull([config], basic_registry.host, images)
    assert helper_on_path.read_text().split() == [basic_registry.host]  # asked once, then cached
    source = DockerConfigCredentials([config])
    assert await source.get(parse_reference("quay.io/a/b")) is None  # helper says "not found"


# --- Bearer tokens ----------------------------------------------------------------------------------


class TokenServer:
    """Issues ES256 JWTs the registry trusts; requires alice's password; counts what it was asked."""

    def __init__(self, root: Path) -> None:
        jwt = pytest.importorskip("jwt")
        pytest.importorskip("cryptography")
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        self._jwt = jwt
        self.key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ares-test-token")])
        now = time.time()
        import datetime as dt

        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(dt.datetime.fromtimestamp(now - 3600, dt.UTC))
            .not_valid_after(dt.datetime.fromtimestamp(now + 3600, dt.UTC))
            .sign(self.key, hashes.SHA256())
        )
        self.cert_path = root / "token.pem"
        self.cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        der = self.key.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        # The registry finds the key by libtrust's key ID: base32 of a truncated SHA-256, in groups of 4.
        raw = base64.b32encode(hashlib.sha256(der).digest()[:30]).decode().rstrip("=")
        self.kid = ":".join(raw[i : i + 4] for i in range(0, len(raw), 4))
        self.requests: list[dict[str, str]] = []
        self.expires_in = 300
        self.grant_nothing_first = False
        self.oauth = True

    def section(self, port: int) -> str:
        return (
            "auth:\n  token:\n"
            f"    realm: http://127.0.0.1:{port}/token\n"
            "    service: ares-test\n    issuer: ares-test-issuer\n"
            f"    rootcertbundle: {self.cert_path}\n"
        )

    async def handle(self, request):
        from aiohttp import web

        header = request.headers.get("Authorization", "")
        self.requests.append({"scope": request.query.get("scope", ""), "auth": header})
        if header != f"Basic {b64(USER, PASSWORD)}":
            return web.json_response({"details": "bad credentials"}, status=401)
        return web.json_response(self.issue(request.query["scope"], request.query["service"]))

    async def handle_post(self, request):
        """OAuth2 `grant_type=refresh_token` with an identity token (404 while `oauth` is off)."""
        from aiohttp import web

        form = await request.post()
        self.requests.append({"scope": str(form.get("scope", "")), "auth": f"POST {form.get('grant_type')}"})
        if not self.oauth:
            return web.Response(status=404)
        if form.get("grant_type") != "refresh_token" or form.get("refresh_token") != IDENTITY_TOKEN:
            return web.json_response({"details": "bad refresh token"}, status=401)
        body = self.issue(str(form["scope"]), str(form["service"]))
        return web.json_response({"access_token": body["token"], "expires_in": body["expires_in"]})

    def issue(self, scope: str, service: str) -> dict[str, object]:
        _, name, actions = scope.split(":")
        granted = [] if (self.grant_nothing_first and len(self.requests) == 1) else actions.split(",")
        now = int(time.time())
        claims = {
            "iss": "ares-test-issuer",
            "sub": USER,
            "aud": service,
            "exp": now + 300,
            "nbf": now - 10,
            "iat": now,
            "jti": os.urandom(8).hex(),
            "access": [{"type": "repository", "name": name, "actions": granted}],
        }
        token = self._jwt.encode(claims, self.key, algorithm="ES256", headers={"kid": self.kid})
        return {"token": token, "expires_in": self.expires_in}


@pytest.fixture
async def token_registry(registry: Registry, images: dict[str, Pushed], tmp_path: Path):
    from aiohttp import web

    server = TokenServer(tmp_path)
    app = web.Application()
    app.router.add_get("/token", server.handle)
    app.router.add_post("/token", server.handle_post)
    async with serve(app) as address:
        port = int(address.rsplit(":", 1)[1])
        reg = start_registry(tmp_path / "reg", auth=server.section(port), storage=registry.root)
        try:
            yield reg, server
        finally:
            reg.stop()


async def test_bearer_token_is_fetched_once_per_scope(
    token_registry, images: dict[str, Pushed], tmp_path: Path
) -> None:
    reg, server = token_registry
    config = write_config(tmp_path / "auth.json", reg.host, {"auth": b64(USER, PASSWORD)})
    await pull([config], reg.host, images)
    await pull([config], reg.host, images)  # a new client: a new token
    assert [r["scope"] for r in server.requests] == ["repository:ares/gzip:pull"] * 2
    async with make_client(reg.host, auth_files=[config]) as client:
        for name in ("gzip", "zstd", "gzip"):
            await resolve(client, parse_reference(f"{reg.host}/ares/{name}:v1"))
    assert [r["scope"] for r in server.requests[2:]] == [
        "repository:ares/gzip:pull",
        "repository:ares/zstd:pull",
    ]


async def test_bearer_token_renewed_on_401_and_on_expiry(
    token_registry,
    images: dict[str, Pushed],
    tmp_path: Path,
) -> None:
    reg, server = token_registry
    config = write_config(tmp_path / "auth.json", reg.host, {"auth": b64(USER, PASSWORD)})
    server.grant_nothing_first = True  # the first token grants nothing: the registry refuses it
    async with make_client(reg.host, auth_files=[config]) as client:
        ref = parse_reference(f"{reg.host}/ares/gzip:v1")
        with pytest.raises(ImageError, match="access denied"):  # a fresh token refused: no loop
            await resolve(client, ref)
        await resolve(client, ref)  # the cached token is refused: forgotten and renewed
    assert len(server.requests) == 2
    server.requests.clear()
    server.grant_nothing_first = False
    server.expires_in = 6  # renewed 5 s early: stale after about a second
    async with make_client(reg.host, auth_files=[config]) as client:
        ref = parse_reference(f"{reg.host}/ares/gzip:v1")
        await resolve(client, ref)
        await resolve(client, ref)
        assert len(server.requests) == 1
        await asyncio.sleep(1.2)
        await resolve(client, ref)
        assert len(server.requests) == 2


async def test_token_server_refusal_says_how_to_log_in(token_registry, images: dict[str, Pushed]) -> None:
    reg, server = token_registry
    with pytest.raises(ImageError, match=f"refused the credentials.*podman login {reg.host}"):
        await pull([], reg.host, images)
    assert server.requests[0]["auth"] == ""


@pytest.mark.parametrize("oauth", [True, False], ids=["oauth2-post", "basic-get-fallback"])
async def test_identity_token_is_exchanged_by_oauth2(
    token_registry, images: dict[str, Pushed], tmp_path: Path, oauth: bool
) -> None:
    """`identitytoken` in the auth file: an OAuth2 refresh_token POST, or GET with Basic if unsupported."""
    reg, server = token_registry
    server.oauth = oauth
    entry = {"auth": b64(USER, PASSWORD), "identitytoken": IDENTITY_TOKEN}
    config = write_config(tmp_path / "config.json", reg.host, entry)
    await pull([config], reg.host, images)
    if oauth:
        assert [r["auth"] for r in server.requests] == ["POST refresh_token"]
    else:
        assert [r["auth"] for r in server.requests] == ["POST refresh_token", f"Basic {b64(USER, PASSWORD)}"]
    assert all(r["scope"] == "repository:ares/gzip:pull" for r in server.requests)
    source = DockerConfigCredentials([config])
    found = await source.get(parse_reference(f"{reg.host}/ares/gzip"))
    assert found is not None and found.identity_token == IDENTITY_TOKEN
    assert IDENTITY_TOKEN not in repr(found) and PASSWORD not in repr(found)
