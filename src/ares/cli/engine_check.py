"""The start-up check of a sandbox backend, shared by the commands that play episodes (``ares run``,
``ares tasks validate``): a backend that cannot work fails the command before it starts (exit 2),
not once per episode."""

from __future__ import annotations

import os
from typing import Any

from ares.cli.common import fail
from ares.errors import SandboxUnavailableError

#: Environment variables a cloud backend needs (any one of the alternatives), as its sandboxes say.
CLOUD_CREDENTIALS = {
    "daytona": ((("DAYTONA_API_KEY",), ("DAYTONA_JWT_TOKEN", "DAYTONA_ORGANIZATION_ID")), "DAYTONA_API_KEY"),
    "e2b": ((("E2B_API_KEY",),), "E2B_API_KEY"),
}


def check_engine(sandbox: str, factory: Any) -> None:
    """A backend that cannot work (no engine answers, no cloud credentials) fails now."""
    if sandbox in CLOUD_CREDENTIALS:
        alternatives, main = CLOUD_CREDENTIALS[sandbox]
        if not any(all(os.environ.get(name) for name in names) for names in alternatives):
            raise fail(f"the {sandbox} sandbox backend needs credentials: export {main}=YOUR_KEY")
    engine = getattr(factory, "engine", None)
    if sandbox != "docker" or engine is None:
        return
    try:
        engine.client_blocking()
    except SandboxUnavailableError as exc:
        raise fail(str(exc)) from None
