"""What an image carries besides files: the defaults its sandboxes start with."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Self


@dataclass(frozen=True, slots=True)
class ImageConfig:
    """Image defaults set by ENV/WORKDIR/USER/SHELL/... (CMD and friends are recorded, not run)."""

    env: dict[str, str] = field(default_factory=dict)
    workdir: str | None = None
    user: str | None = None
    shell: tuple[str, ...] = ("/bin/sh", "-c")
    cmd: tuple[str, ...] | None = None
    entrypoint: tuple[str, ...] | None = None
    labels: dict[str, str] = field(default_factory=dict)
    exposed_ports: tuple[str, ...] = ()
    volumes: tuple[str, ...] = ()
    stop_signal: str | None = None
    healthcheck: str | None = None

    def with_env(self, **values: str) -> Self:
        return replace(self, env={**self.env, **values})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        tuples = ("shell", "exposed_ports", "volumes")
        fixed = {
            k: tuple(v) if k in tuples or (k in ("cmd", "entrypoint") and v) else v for k, v in data.items()
        }
        return cls(**fixed)

    @classmethod
    def from_oci(cls, document: Mapping[str, Any]) -> Self:
        """The defaults an OCI image config document (its ``config`` object) sets.

        ``Env`` entries are ``KEY=VALUE`` (a later key wins, as in docker); an image that sets
        nothing gets ARES's defaults.
        """
        raw = document.get("config") or {}
        env: dict[str, str] = {}
        for item in raw.get("Env") or []:
            key, _, value = str(item).partition("=")
            if key:
                env[key] = value

        def words(key: str) -> tuple[str, ...] | None:
            value = raw.get(key)
            return tuple(str(v) for v in value) if value else None

        return cls(
            env=env,
            workdir=raw.get("WorkingDir") or None,
            user=raw.get("User") or None,
            cmd=words("Cmd"),
            entrypoint=words("Entrypoint"),
            labels={str(k): str(v) for k, v in (raw.get("Labels") or {}).items()},
            exposed_ports=tuple(sorted(raw.get("ExposedPorts") or {})),
            volumes=tuple(sorted(raw.get("Volumes") or {})),
            stop_signal=raw.get("StopSignal") or None,
            shell=tuple(raw.get("Shell") or ("/bin/sh", "-c")),
        )
