"""Where a registry comes from: ``--registry FILE|URL``, else ``$ARES_HARBOR_REGISTRY``, else Harbor's
public registry. A registry read from a URL is kept in the cache, so a later run without the network
still resolves names (with a warning that the copy may be old)."""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import unquote, urlsplit

from ares.tasks.harbor_registry.model import DatasetError, Registry, parse_registry

DEFAULT_REGISTRY_URL = "https://raw.githubusercontent.com/laude-institute/harbor/main/registry.json"
REGISTRY_ENV = "ARES_HARBOR_REGISTRY"
_FETCH_TIMEOUT_S = 30.0
_MAX_BYTES = 64 * 1024 * 1024

log = logging.getLogger(__name__)
#: Registries already read from a URL by this process (``make`` may be called once per worker).
_FETCHED: dict[str, str] = {}


def registry_location(registry: str | Path | None) -> str:
    """The registry to read: the argument, else ``$ARES_HARBOR_REGISTRY``, else Harbor's public one."""
    if registry is not None and str(registry).strip():
        return str(registry).strip()
    return os.environ.get(REGISTRY_ENV, "").strip() or DEFAULT_REGISTRY_URL


def read_registry(registry: str | Path | None, saved_dir: Path) -> Registry:
    """Read and parse a registry (a path, a file:// URL, or an http(s) URL saved under ``saved_dir``)."""
    location = registry_location(registry)
    scheme = urlsplit(location).scheme.lower() if "://" in location else ""
    if scheme in ("http", "https"):
        return _fetch(location, saved_dir)
    if scheme == "file":
        path = Path(unquote(urlsplit(location).path))
    elif scheme:
        raise DatasetError(f"registry {location!r}: use a file path or an http(s):// or file:// URL")
    else:
        path = Path(location).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DatasetError(f"registry file {path} does not exist; pass --registry FILE|URL") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"registry file {path} cannot be read: {exc}") from None
    return parse_registry(text, str(path), remote=False)


def _fetch(url: str, saved_dir: Path) -> Registry:
    """The registry at ``url``, saved (once it parses) for when the network is gone."""
    if url in _FETCHED:
        return parse_registry(_FETCHED[url], url, remote=True)
    saved = saved_dir / f"{hashlib.sha256(url.encode()).hexdigest()[:24]}.json"
    try:
        with urllib.request.urlopen(url, timeout=_FETCH_TIMEOUT_S) as response:  # http(s) only
            body = response.read(_MAX_BYTES + 1)
        if len(body) > _MAX_BYTES:
            raise DatasetError(f"registry {url} is larger than {_MAX_BYTES // 2**20} MiB")
        text = body.decode("utf-8")
    except (OSError, urllib.error.URLError, UnicodeDecodeError, ValueError) as exc:
        if saved.is_file():
            log.warning("cannot fetch the registry %s (%s); using the copy saved on %s", url, exc, saved)
            _FETCHED[url] = saved.read_text(encoding="utf-8")
            return parse_registry(_FETCHED[url], url, remote=True)
        raise DatasetError(
            f"cannot fetch the registry {url}: {exc}; check the network, or pass --registry FILE "
            f"(or set ${REGISTRY_ENV}) for a local copy"
        ) from None
    registry = parse_registry(text, url, remote=True)
    saved_dir.mkdir(parents=True, exist_ok=True)
    staged = saved.with_name(f"{saved.name}.{secrets.token_hex(4)}.tmp")
    staged.write_text(text, encoding="utf-8")
    os.replace(staged, saved)
    _FETCHED[url] = text
    return registry
