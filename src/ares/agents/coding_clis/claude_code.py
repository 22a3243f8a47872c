"""Claude Code (``@anthropic-ai/claude-code``) as an ARES agent: ``claude -p`` through the proxy.

Claude Code speaks Anthropic Messages to ``$ANTHROPIC_BASE_URL``, here the proxy's session on the
sandbox's loopback. Its configuration lives in ``$CLAUDE_CONFIG_DIR``, which ARES points at a dir in
the CLI's private home and fills itself (``settings.json``, ``.claude.json``); ``--setting-sources
user`` keeps any ``.claude/`` of the task's repo out. Everything that would reach a host other than
the proxy is off: telemetry, error reports, feature flags, auto-updates, the update and installation
checks; permission prompts are bypassed (the sandbox is the boundary). The instruction goes in on
stdin, the run's result comes out as one JSON object on stdout.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

from ares.agents.coding_clis.action_format import CliActionFormat
from ares.agents.coding_clis.definition import CliInvocation, CliPaths, Dialect
from ares.agents.install.npm import NpmPackage

#: The version ARES's scripted actions (tool names, argument shapes) were taken from.
PINNED_VERSION = "2.1.332"
#: The native linux-x64 (glibc) binary, an optional dependency npm picks without install scripts.
#: A musl image (Alpine) would need ``@anthropic-ai/claude-code-linux-x64-musl/claude`` instead,
#: which npm only installs on a musl host (or with ``--libc=musl``).
BINARY_GLOB = "@anthropic-ai/claude-code-linux-x64/claude"
#: The CLI's config dir, relative to its private home.
CONFIG_DIR = ".claude"
#: Managed (admin) settings: read from here whatever the flags and environment say (this build
#: ignores ``CLAUDE_CODE_MANAGED_SETTINGS_PATH``), and they win over ARES's config. The local
#: sandbox shows the host's /etc, so a host's managed settings would apply: the run warns.
MANAGED_DIR = "/etc/claude-code"
MANAGED_WARNING = (
    f"ares: warning: {MANAGED_DIR} exists in the sandbox (the image's, or on the local backend the "
    "host's): Claude Code applies its managed settings over the config ARES wrote"
)
#: Claude Code's shell tool; its arguments: ``command``, ``timeout`` (ms), ``description``.
SHELL_TOOL = "Bash"
#: The longest foreground command the Bash tool allows (its default is 2 minutes): a reference
#: solution that builds or installs must not be cut short.
SHELL_TIMEOUT_MS = 600_000

#: Environment that turns off every call to a host but the proxy, and every interactive prompt.
QUIET_ENV = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_UPDATES": "1",
    "DISABLE_GROWTHBOOK": "1",
    "DISABLE_INSTALLATION_CHECKS": "1",
    "DISABLE_COST_WARNINGS": "1",
    "CLAUDE_CODE_DISABLE_FEATURE_FLAGS": "1",
    "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
    "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL": "1",
    "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
    "CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1",
    "CLAUDE_CODE_SKIP_REPO_UPLOAD": "1",
    "CLAUDE_CODE_EVEN_MORE_DANGEROUSLY_SKIP_PERMISSIONS": "1",
}


def _settings(model: str) -> str:
    """``settings.json``: its ``env`` block wins over the process's, so the quiet switches and the
    model hold even if the image sets otherwise."""
    settings = {
        "env": {**QUIET_ENV, "ANTHROPIC_MODEL": model, "ANTHROPIC_SMALL_FAST_MODEL": model},
        "permissions": {"defaultMode": "bypassPermissions"},
        "autoUpdates": False,
        "includeCoAuthoredBy": False,
    }
    return json.dumps(settings, indent=2) + "\n"


def _global_config() -> str:
    """``.claude.json``: onboarding done, so nothing asks first."""
    config = {"hasCompletedOnboarding": True, "autoUpdates": False, "bypassPermissionsModeAccepted": True}
    return json.dumps(config, indent=2) + "\n"


def _shell_arguments(command: str) -> dict[str, object]:
    return {"command": command, "timeout": SHELL_TIMEOUT_MS, "description": "Run the reference solution"}


@dataclass(frozen=True, slots=True)
class ClaudeCode:
    """Claude Code at ``version``."""

    version: str = PINNED_VERSION
    name: str = "claude-code"
    dialect: Dialect = "anthropic"

    @property
    def package(self) -> NpmPackage:
        return NpmPackage(
            agent=self.name, package="@anthropic-ai/claude-code", version=self.version,
            command="claude", binary=BINARY_GLOB,
        )  # fmt: skip

    def invocation(self, paths: CliPaths) -> CliInvocation:
        config_dir = f"{paths.home}/{CONFIG_DIR}"
        flags = [
            "-p", "--output-format", "json", "--model", paths.model,
            "--dangerously-skip-permissions", "--setting-sources", "user",
            "--settings", f"{config_dir}/settings.json",
        ]  # fmt: skip
        warn = f"if [ -e {MANAGED_DIR} ]; then echo {shlex.quote(MANAGED_WARNING)} >&2; fi; "
        run = f'{shlex.quote(paths.executable)} {shlex.join(flags)} < "$ARES_INSTRUCTION_FILE"'
        command = warn + run
        env = {
            **QUIET_ENV,
            "CLAUDE_CONFIG_DIR": config_dir,
            "ANTHROPIC_MODEL": paths.model,
            "ANTHROPIC_SMALL_FAST_MODEL": paths.model,
            "IS_SANDBOX": "1",
        }
        files = {
            f"{CONFIG_DIR}/settings.json": _settings(paths.model),
            f"{CONFIG_DIR}/.claude.json": _global_config(),
        }
        return CliInvocation(command=command, files=files, env=env)

    def action_format(self) -> CliActionFormat:
        return CliActionFormat(
            cli=self.name, version=self.version, known_version=PINNED_VERSION,
            shell_tool=SHELL_TOOL, shell_arguments=_shell_arguments,
        )  # fmt: skip


def definition(version: str | None = None) -> ClaudeCode:
    """Claude Code at ``version`` (default: the version ARES pins)."""
    return ClaudeCode(version or PINNED_VERSION)
