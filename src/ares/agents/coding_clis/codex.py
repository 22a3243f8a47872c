"""Codex CLI (``@openai/codex``) as an ARES agent: ``codex exec`` against the proxy's Responses API.

Codex's user config is ``$CODEX_HOME/config.toml``; ARES points ``CODEX_HOME`` into the CLI's
private home and writes that file itself, so nothing of a host's ``~/.codex`` is read (Codex also
reads ``/etc/codex/config.toml``, below the user layer: the keys ARES sets win). The model provider
is a custom one (``ares``, ``wire_api = "responses"``): the built-in ``openai`` provider ignores
base-URL overrides. Its base URL is only known at run time, so the command sets it with ``-c`` from
``$ARES_PROXY_URL``. Approvals and Codex's own sandbox are off (the ARES sandbox is the sandbox),
and so is the login shell (``bash -l`` resets PATH from /etc/profile and loses the image's own).
Update checks, analytics, feedback and the features that reach OpenAI's services (apps, plugins,
web search...) are off.
"""

from __future__ import annotations

import base64
import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ares.agents.coding_clis.action_format import CliActionFormat
from ares.agents.coding_clis.definition import CliInvocation, CliPaths, Dialect
from ares.agents.install.npm import NpmPackage

#: The version ARES pins (``$ARES_CODEX_VERSION`` overrides it).
PINNED_VERSION = "0.171.0"
#: The version whose tool names ``action_format`` speaks.
KNOWN_VERSION = "0.171.0"
#: Codex's shell tool in that version (its command goes in argument ``cmd``).
SHELL_TOOL = "exec_command"

#: ``exec_command`` waits this long for the command before returning a session to poll (its max).
MAX_YIELD_MS = 30_000

#: The native binary inside the linux-x64 optional dependency. Codex ships one static musl build
#: for Linux, so it runs on glibc and musl (Alpine) images alike; an arm64 host would need the
#: ``codex-linux-arm64`` package and its ``aarch64-unknown-linux-musl`` path instead.
LINUX_X64_BINARY = "@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"

#: Feature flags turned off: each would reach an OpenAI service, or add tools beyond a coding
#: agent's shell and patch tools.
DISABLED_FEATURES = (
    "apps", "plugins", "remote_plugin", "plugin_sharing", "tool_suggest", "skill_mcp_dependency_install",
    "image_generation", "browser_use", "browser_use_external", "computer_use", "in_app_browser",
    "in_app_updates", "api_key_model_discovery", "enable_request_compression", "multi_agent",
)  # fmt: skip


def _toml(value: object) -> str:
    """A TOML value: strings as JSON strings (a valid TOML basic string), booleans lowercase."""
    return json.dumps(value)


def config_toml(model: str) -> str:
    """The whole ``config.toml`` ARES writes. The proxy's port is known only at run time: the command
    replaces this ``base_url`` (the discard port, never served) with ``-c``."""
    top: dict[str, object] = {
        "model": model, "model_provider": "ares", "approval_policy": "never",
        "sandbox_mode": "danger-full-access", "check_for_update_on_startup": False,
        "hide_agent_reasoning": False, "web_search": "disabled", "allow_login_shell": False,
    }  # fmt: skip
    tables: dict[str, Mapping[str, object]] = {
        "model_providers.ares": {
            "name": "ARES proxy", "base_url": "http://127.0.0.1:9/v1", "env_key": "OPENAI_API_KEY",
            "wire_api": "responses", "request_max_retries": 0, "stream_max_retries": 0,
        },
        "analytics": {"enabled": False},
        "feedback": {"enabled": False},
        "features": {name: False for name in DISABLED_FEATURES},
    }  # fmt: skip
    lines = [f"{key} = {_toml(value)}" for key, value in top.items()]
    for table, values in tables.items():
        lines += ["", f"[{table}]", *(f"{key} = {_toml(value)}" for key, value in values.items())]
    return "\n".join(lines) + "\n"


def shell_arguments(command: str) -> Mapping[str, Any]:
    """``exec_command``'s arguments for ``command``, handed to bash as base64: Codex refuses any
    command whose text holds ``rm -f``-style words (the oracle's ``rm -rf /solution``) before it
    runs, whatever the approval mode; the wait is Codex's longest, so the call returns the exit."""
    encoded = base64.b64encode(command.encode()).decode()
    return {"cmd": f"printf %s {encoded} | base64 -d | bash", "yield_time_ms": MAX_YIELD_MS}


@dataclass(frozen=True, slots=True)
class CodexCli:
    """Codex CLI at ``version``."""

    version: str = PINNED_VERSION
    name: str = "codex"
    dialect: Dialect = "responses"

    @property
    def package(self) -> NpmPackage:
        return NpmPackage(
            agent="codex", package="@openai/codex", version=self.version, command="codex",
            binary=LINUX_X64_BINARY,
        )  # fmt: skip

    def invocation(self, paths: CliPaths) -> CliInvocation:
        codex_home = f"{paths.home}/.codex"
        flags = [
            "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "--json",
            "--color", "never", "-C", paths.workdir,
        ]  # fmt: skip
        command = (
            f"exec {shlex.quote(paths.executable)} {shlex.join(flags)}"
            ' -c "model_providers.ares.base_url=\\"$ARES_PROXY_URL\\""'
            ' - < "$ARES_INSTRUCTION_FILE"'
        )
        env = {"CODEX_HOME": codex_home, "NO_COLOR": "1", "RUST_LOG": "error"}
        return CliInvocation(command=command, files={".codex/config.toml": config_toml(paths.model)}, env=env)

    def action_format(self) -> CliActionFormat:
        return CliActionFormat(
            cli=self.name, version=self.version, known_version=KNOWN_VERSION, shell_tool=SHELL_TOOL,
            shell_arguments=shell_arguments,
        )  # fmt: skip


def definition(version: str | None = None) -> CodexCli:
    """Codex CLI at ``version`` (default: the pinned one)."""
    return CodexCli(version or PINNED_VERSION)
