"""Where a reference is pulled from: mirrors, rewritten locations, blocked and plain-HTTP registries.

One frozen `RegistryConfig` is resolved from, in order of precedence:

1. the environment: `ARES_INSECURE_REGISTRIES=host:port,...` and
   `ARES_REGISTRY_MIRRORS=prefix=location,...` (a prefix may repeat: its mirrors are tried in order);
2. the ARES registries file, `$ARES_REGISTRIES_CONFIG` or `~/.config/ares/registries.toml`: the
   `registries.conf` v2 syntax below, plus `insecure-registries = [...]` and a `[mirrors]` table of
   `"prefix" = ["location", ...]`;
3. containers' `registries.conf` v2 (`$CONTAINERS_REGISTRIES_CONF` alone, else the user's
   `~/.config/containers/registries.conf` or the system's `/etc/containers/registries.conf`, each
   followed by the `*.conf` files of the `registries.conf.d` directory beside it): `[[registry]]`
   tables with `prefix`, `location`, `insecure`, `blocked`, `mirror-by-digest-only` and
   `[[registry.mirror]]` (`location`, `insecure`, `pull-from-mirror`).

Bare names always mean Docker Hub: `unqualified-search-registries` and short-name aliases are not
used (no search across registries). Plain HTTP is only for a host named insecure, loopback included.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ares.images.errors import ImageError
from ares.images.registry.reference import DOCKER_HUB, Reference

INSECURE_ENV = "ARES_INSECURE_REGISTRIES"
MIRRORS_ENV = "ARES_REGISTRY_MIRRORS"
ARES_FILE_ENV = "ARES_REGISTRIES_CONFIG"
CONTAINERS_FILE_ENV = "CONTAINERS_REGISTRIES_CONF"
_HUB_ALIASES = frozenset({"index.docker.io", "registry-1.docker.io"})
_PULL_FROM_MIRROR = frozenset({"all", "digest-only", "tag-only"})


@dataclass(frozen=True)
class Mirror:
    """A registry that may serve a prefix's images before its own location does."""

    location: str
    insecure: bool = False
    pull_from_mirror: str = "all"  # "all" | "digest-only" | "tag-only"

    def serves(self, reference: Reference, by_digest_only: bool) -> bool:
        if reference.digest is not None:
            return self.pull_from_mirror in ("all", "digest-only")
        return self.pull_from_mirror in ("all", "tag-only") and not by_digest_only


@dataclass(frozen=True)
class RegistryEntry:
    """One `[[registry]]`: references under `prefix` are pulled from `location` (and its mirrors)."""

    prefix: str
    location: str
    insecure: bool = False
    blocked: bool = False
    mirror_by_digest_only: bool = False
    mirrors: tuple[Mirror, ...] = ()
    source: str = ""  # the file or variable it came from, for messages

    @property
    def wildcard(self) -> bool:
        return self.prefix.startswith("*.")

    def match(self, reference: Reference) -> str | None:
        """The part of `reference.name` this entry covers (what its location replaces), or None."""
        if self.wildcard:
            host = reference.registry.rsplit(":", 1)[0] if "]" not in reference.registry else ""
            return reference.registry if host.endswith(self.prefix[1:]) else None
        name = reference.name
        if name == self.prefix or name.startswith(self.prefix + "/"):
            return self.prefix
        return None


@dataclass(frozen=True)
class Endpoint:
    """A place to try: the reference rewritten for that host, and whether it is a mirror."""

    reference: Reference
    mirror: bool = False


@dataclass(frozen=True)
class RegistryConfig:
    """Registry entries (longest prefix wins) and the hosts spoken to over plain HTTP."""

    entries: tuple[RegistryEntry, ...] = ()
    insecure: frozenset[str] = frozenset()
    sources: tuple[str, ...] = field(default=(), compare=False)

    @classmethod
    def load(cls, env: Mapping[str, str] | None = None, *, system_dir: Path | None = None) -> RegistryConfig:
        """Resolve the configuration from the environment and the files it points at (see module doc)."""
        env = os.environ if env is None else env
        sources: list[str] = []
        entries: dict[str, RegistryEntry] = {}
        insecure: set[str] = set()
        for path in containers_files(env, system_dir or Path("/etc/containers")):
            _merge_file(path, entries, insecure, sources, ares=False)
        ares_file = ares_config_file(env)
        ares_mirrors: list[tuple[str, str]] = []
        if ares_file is not None:
            ares_mirrors = _merge_file(ares_file, entries, insecure, sources, ares=True)
        env_mirrors = parse_mirrors(env.get(MIRRORS_ENV, ""))
        insecure |= parse_insecure(env.get(INSECURE_ENV, ""))
        _add_mirrors(entries, [*((p, loc, MIRRORS_ENV) for p, loc in env_mirrors), *ares_mirrors])
        return cls(tuple(entries.values()), frozenset(insecure), tuple(sources))

    def with_insecure(self, hosts: Iterable[str]) -> RegistryConfig:
        """The same entries, with exactly `hosts` (host:port) allowed plain HTTP."""
        return replace(self, insecure=frozenset(hosts))

    def is_insecure(self, reference: Reference) -> bool:
        return reference.registry in self.insecure or reference.endpoint in self.insecure

    def entry_for(self, reference: Reference) -> RegistryEntry | None:
        """The entry with the longest prefix matching `reference` (exact prefixes beat wildcards)."""
        best: tuple[int, RegistryEntry] | None = None
        for entry in self.entries:
            if entry.match(reference) is None:
                continue
            rank = len(entry.prefix) - (1000 if entry.wildcard else 0)
            if best is None or rank > best[0]:
                best = (rank, entry)
        return None if best is None else best[1]

    def endpoints(self, reference: Reference) -> tuple[Endpoint, ...]:
        """Where to pull `reference` from, in order: its mirrors, then its (rewritten) location."""
        entry = self.entry_for(reference)
        if entry is None:
            return (Endpoint(reference),)
        if entry.blocked:
            raise ImageError(
                f"{reference}: pulls from {entry.prefix} are blocked by {entry.source or 'the registry'}"
                " configuration (blocked = true); use another registry or remove that entry"
            )
        covered = entry.match(reference)
        assert covered is not None
        out = [
            Endpoint(_rewrite(reference, covered, m.location), mirror=True)
            for m in entry.mirrors
            if m.serves(reference, entry.mirror_by_digest_only)
        ]
        primary = reference if entry.wildcard else _rewrite(reference, covered, entry.location)
        out.append(Endpoint(primary))
        return tuple(out)


def parse_insecure(raw: str) -> set[str]:
    """`host:port,host2` -> the set of hosts."""
    return {part.strip() for part in raw.split(",") if part.strip()}


def parse_mirrors(raw: str) -> list[tuple[str, str]]:
    """`prefix=location,prefix=location2,...` -> [(prefix, location)], order kept."""
    out: list[tuple[str, str]] = []
    for part in raw.split(","):
        if not part.strip():
            continue
        prefix, sep, location = part.partition("=")
        if not sep or not prefix.strip() or not location.strip():
            raise ImageError(
                f"{MIRRORS_ENV}: {part.strip()!r} is not prefix=location "
                "(e.g. docker.io=127.0.0.1:5000,quay.io=mirror.example/quay)"
            )
        out.append((_normalise(prefix.strip()), _normalise(location.strip())))
    return out


def containers_files(env: Mapping[str, str], system_dir: Path) -> list[Path]:
    """The registries.conf files containers tools read: one main file and its drop-in directory."""
    if env.get(CONTAINERS_FILE_ENV):
        return [Path(env[CONTAINERS_FILE_ENV])]
    user_dir = _config_home(env) / "containers"
    main = user_dir / "registries.conf"
    if not main.is_file():
        main = system_dir / "registries.conf"
    files = [main] if main.is_file() else []
    for directory in dict.fromkeys((system_dir / "registries.conf.d", user_dir / "registries.conf.d")):
        if directory.is_dir():
            files.extend(sorted(p for p in directory.glob("*.conf") if p.is_file()))
    return files


def ares_config_file(env: Mapping[str, str]) -> Path | None:
    if env.get(ARES_FILE_ENV):
        return Path(env[ARES_FILE_ENV])
    path = _config_home(env) / "ares" / "registries.toml"
    return path if path.is_file() else None


def _config_home(env: Mapping[str, str]) -> Path:
    if env.get("XDG_CONFIG_HOME"):
        return Path(env["XDG_CONFIG_HOME"])
    return Path(env["HOME"]) / ".config" if env.get("HOME") else Path.home() / ".config"


def _merge_file(
    path: Path, entries: dict[str, RegistryEntry], insecure: set[str], sources: list[str], *, ares: bool
) -> list[tuple[str, str, str]]:
    """Fold one file into `entries` (same prefix: the later file wins); return its [mirrors] shorthand."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ImageError(f"registry configuration {path} does not exist") from exc
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ImageError(f"cannot read registry configuration {path}: {exc}") from exc
    sources.append(str(path))
    where = str(path)
    v1 = data.get("registries")
    if isinstance(v1, Mapping):  # the old v1 format: only its insecure and block lists apply
        insecure.update(_strings(v1.get("insecure", {}).get("registries", []), path, "registries.insecure"))
        for host in _strings(v1.get("block", {}).get("registries", []), path, "registries.block"):
            entries[host] = RegistryEntry(_normalise(host), _normalise(host), blocked=True, source=where)
    for raw in _tables(data.get("registry", []), path, "[[registry]]"):
        entry = _entry(raw, path)
        entries[entry.prefix] = entry
        if entry.insecure and not entry.wildcard:
            insecure.add(_host(entry.location))
        insecure.update(_host(m.location) for m in entry.mirrors if m.insecure)
    if not ares:
        return []
    insecure.update(_strings(data.get("insecure-registries", []), path, "insecure-registries"))
    shorthand = data.get("mirrors", {})
    if not isinstance(shorthand, Mapping):
        raise ImageError(f'{path}: [mirrors] must be a table of "prefix" = ["location", ...]')
    return [
        (_normalise(prefix), _normalise(location), where)
        for prefix, locations in shorthand.items()
        for location in _strings(locations, path, f"mirrors.{prefix}")
    ]


def _entry(raw: Mapping[str, Any], path: Path) -> RegistryEntry:
    prefix = _normalise(str(raw.get("prefix") or raw.get("location") or ""))
    location = _normalise(str(raw.get("location") or ""))
    if not prefix:
        raise ImageError(f"{path}: a [[registry]] has neither prefix nor location")
    if "*" in prefix:
        if not prefix.startswith("*.") or "/" in prefix or "*" in prefix[1:]:
            raise ImageError(f"{path}: wildcard prefix {prefix!r} must look like *.example.com")
        if location:
            raise ImageError(f"{path}: [[registry]] with wildcard prefix {prefix!r} cannot set a location")
    elif not location:
        location = prefix
    mirrors = []
    for m in _tables(raw.get("mirror", []), path, "[[registry.mirror]]"):
        mode = str(m.get("pull-from-mirror") or "all")
        if mode not in _PULL_FROM_MIRROR:
            raise ImageError(f"{path}: pull-from-mirror = {mode!r}; use all, digest-only or tag-only")
        if not m.get("location"):
            raise ImageError(f"{path}: a [[registry.mirror]] of {prefix} has no location")
        mirrors.append(Mirror(_normalise(str(m["location"])), bool(m.get("insecure", False)), mode))
    return RegistryEntry(
        prefix=prefix,
        location=location,
        insecure=bool(raw.get("insecure", False)),
        blocked=bool(raw.get("blocked", False)),
        mirror_by_digest_only=bool(raw.get("mirror-by-digest-only", False)),
        mirrors=tuple(mirrors),
        source=str(path),
    )


def _add_mirrors(entries: dict[str, RegistryEntry], added: list[tuple[str, str, str]]) -> None:
    """Put ARES mirrors, in the order given, ahead of the mirrors registries.conf lists for that prefix."""
    by_prefix: dict[str, list[Mirror]] = {}
    for prefix, location, where in added:
        if prefix not in entries:
            entries[prefix] = RegistryEntry(prefix, "" if prefix.startswith("*.") else prefix, source=where)
        by_prefix.setdefault(prefix, []).append(Mirror(location))
    for prefix, mirrors in by_prefix.items():
        entries[prefix] = replace(entries[prefix], mirrors=(*mirrors, *entries[prefix].mirrors))


def _rewrite(reference: Reference, covered: str, location: str) -> Reference:
    """Replace the `covered` start of the reference's name by `location`."""
    name = location + reference.name[len(covered) :]
    registry, _, repository = name.partition("/")
    if not repository:
        raise ImageError(f"{reference}: rewriting {covered} to {location} leaves no repository name")
    registry = DOCKER_HUB if registry in _HUB_ALIASES else registry
    return replace(reference, registry=registry, repository=repository)


def _normalise(location: str) -> str:
    location = location.removeprefix("https://").removeprefix("http://").rstrip("/")
    host, sep, rest = location.partition("/")
    return (DOCKER_HUB if host in _HUB_ALIASES else host) + sep + rest


def _host(location: str) -> str:
    return location.partition("/")[0]


def _tables(value: Any, path: Path, what: str) -> list[Mapping[str, Any]]:
    if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
        raise ImageError(f"{path}: {what} must be an array of tables")
    return value


def _strings(value: Any, path: Path, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ImageError(f"{path}: {what} must be a list of strings")
    return [v.strip() for v in value if v.strip()]
