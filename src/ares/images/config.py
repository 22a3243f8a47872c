"""What an image carries besides files: the defaults its sandboxes start with."""

from __future__ import annotations

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
