"""Registry credentials from the files podman and docker write, and docker's credential helpers."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ares.images.errors import ImageError
from ares.images.registry.reference import DOCKER_HUB, Reference

# Docker's own key for Hub credentials, also what its helpers are asked for.
_HUB_KEY = "https://index.docker.io/v1/"
_HUB_HOSTS = frozenset({"docker.io", "index.docker.io", "registry-1.docker.io"})
_HELPER_TIMEOUT = 30.0
_TOKEN_USER = "<token>"  # the username docker stores with an identity token


@dataclass(frozen=True)
class Credentials:
    """A username and password for HTTP Basic auth, or a Docker identity token (an OAuth2 refresh
    token, `identitytoken` in the auth file) for the token server; `repr` never shows a secret."""

    username: str
    password: str = field(repr=False)
    identity_token: str | None = field(default=None, repr=False)


class CredentialSource(Protocol):
    """Where the transport asks for credentials; None means anonymous."""

    async def get(self, reference: Reference) -> Credentials | None: ...


def default_auth_files(env: Mapping[str, str] | None = None) -> list[Path]:
    """The files podman and docker read, in their order: REGISTRY_AUTH_FILE, containers, docker."""
    env = os.environ if env is None else env
    files: list[Path] = []
    if env.get("REGISTRY_AUTH_FILE"):
        files.append(Path(env["REGISTRY_AUTH_FILE"]))
    if env.get("XDG_RUNTIME_DIR"):
        files.append(Path(env["XDG_RUNTIME_DIR"]) / "containers" / "auth.json")
    docker_dir = Path(env["DOCKER_CONFIG"]) if env.get("DOCKER_CONFIG") else Path.home() / ".docker"
    files.append(docker_dir / "config.json")
    return files


class DockerConfigCredentials:
    """Reads `auths`, `credHelpers` and `credsStore` from the first auth files that name a registry."""

    def __init__(self, files: list[Path] | None = None) -> None:
        self._files = default_auth_files() if files is None else files
        self._cache: dict[str, Credentials | None] = {}

    async def get(self, reference: Reference) -> Credentials | None:
        key = reference.name
        if key not in self._cache:
            self._cache[key] = await self._lookup(reference)
        return self._cache[key]

    async def _lookup(self, reference: Reference) -> Credentials | None:
        for path in self._files:
            config = await asyncio.to_thread(_read_json, path)
            if config is None:
                continue
            helper = _helper_for(config, reference.registry)
            if helper is not None:
                found = await _run_helper(helper, reference.registry)
                if found is not None:
                    return found
            found = _from_auths(config.get("auths") or {}, reference, path)
            if found is not None:
                return found
        return None


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        text = path.read_text()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise ImageError(f"cannot read registry auth file {path}: {exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ImageError(f"registry auth file {path} is not valid JSON ({exc}); fix or remove it") from exc
    return data if isinstance(data, dict) else None


def _normalise_key(key: str) -> str:
    """`https://host:port/path/` -> `host:port/path`, with Docker Hub's aliases folded into docker.io."""
    key = key.removeprefix("https://").removeprefix("http://").rstrip("/")
    host, _, path = key.partition("/")
    if host in _HUB_HOSTS:
        return DOCKER_HUB if path in ("", "v1", "v2") else f"{DOCKER_HUB}/{path}"
    return key


def _from_auths(auths: Mapping[str, Any], reference: Reference, path: Path) -> Credentials | None:
    """The most specific entry whose key is the registry or a namespace prefix of the repository."""
    target = reference.name
    best: tuple[int, Mapping[str, Any]] | None = None
    for key, entry in auths.items():
        norm = _normalise_key(key)
        matches = target == norm or target.startswith(norm + "/")
        if matches and isinstance(entry, Mapping) and (best is None or len(norm) > best[0]):
            best = (len(norm), entry)
    if best is None:
        return None
    entry = best[1]
    user = password = ""
    if entry.get("auth"):
        try:
            user, _, password = base64.b64decode(entry["auth"]).decode().partition(":")
        except (ValueError, UnicodeDecodeError) as exc:
            raise ImageError(
                f"the 'auth' entry for {reference.registry} in {path} is not base64 of user:password"
            ) from exc
    elif entry.get("username"):
        user, password = str(entry["username"]), str(entry.get("password", ""))
    token = entry.get("identitytoken")
    if token:
        return Credentials(user or _TOKEN_USER, password, identity_token=str(token))
    return Credentials(user, password) if user else None


def _helper_for(config: Mapping[str, Any], registry: str) -> str | None:
    helpers = config.get("credHelpers") or {}
    for key, name in helpers.items():
        if _normalise_key(key) == registry:
            return str(name)
    store = config.get("credsStore")
    return str(store) if store else None


async def _run_helper(name: str, registry: str) -> Credentials | None:
    """Ask `docker-credential-<name> get`; a helper that is not installed or knows nothing gives None."""
    program = shutil.which(f"docker-credential-{name}")
    if program is None:
        return None
    server = _HUB_KEY if registry == DOCKER_HUB else registry
    proc = await asyncio.create_subprocess_exec(
        program,
        "get",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(server.encode()), _HELPER_TIMEOUT)
    except TimeoutError as exc:
        proc.kill()
        await proc.wait()
        raise ImageError(f"credential helper {program} did not answer within {_HELPER_TIMEOUT:.0f}s") from exc
    if proc.returncode != 0:
        # Helpers exit non-zero with "credentials not found" for registries they do not know.
        if b"not found" in (out + err).lower():
            return None
        raise ImageError(
            f"credential helper {program} failed for {registry}: {err.decode(errors='replace').strip()}"
        )
    try:
        data = json.loads(out)
        if data["Username"] == _TOKEN_USER:  # docker's convention: the secret is an identity token
            return Credentials(_TOKEN_USER, "", identity_token=str(data["Secret"]))
        return Credentials(str(data["Username"]), str(data["Secret"]))
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ImageError(f"credential helper {program} gave output that is not its JSON format") from exc
