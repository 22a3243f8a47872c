"""What ARES must know to run one coding CLI headless through its proxy: a ``CliDefinition``.

A definition names the npm package (pinned), the API dialect the CLI speaks, and builds the
invocation: the shell command, the config files ARES writes into the CLI's private home (never
the host's), and the environment (base URL at the proxy session, telemetry and updates off). The
proxy's URL is only known at run time; commands and configs read it from ``$ARES_PROXY_URL`` (the
OpenAI-style ``.../v1`` base) or ``$ARES_PROXY_ORIGIN`` (``http://127.0.0.1:PORT``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from ares.agents.base import ActionFormat
from ares.agents.install.npm import NpmPackage

#: The proxy dialect a CLI speaks.
Dialect = Literal["chat", "responses", "anthropic"]


@dataclass(frozen=True, slots=True)
class CliInvocation:
    """One run of a CLI: ``command`` (a shell command, run in the task's workdir; the instruction is
    in ``$ARES_INSTRUCTION_FILE``), ``files`` written under ``home`` before it starts, ``env``."""

    command: str
    files: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CliPaths:
    """Where things are in the sandbox for one run: the CLI's executable and its private home."""

    executable: str
    home: str
    workdir: str
    instruction_file: str
    model: str


class CliDefinition(Protocol):
    """One coding CLI (Codex, Claude Code, OpenCode...) at one version."""

    @property
    def name(self) -> str: ...

    @property
    def package(self) -> NpmPackage: ...

    @property
    def dialect(self) -> Dialect: ...

    def invocation(self, paths: CliPaths) -> CliInvocation:
        """The command, config files and environment of one headless run."""
        ...

    def action_format(self) -> ActionFormat:
        """How scripted policies (oracle, null) speak this CLI's own tools."""
        ...
