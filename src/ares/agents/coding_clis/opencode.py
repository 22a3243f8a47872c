"""OpenCode (``opencode-ai`` on npm) as an ARES agent: ``opencode run``, a chat-completions provider.

OpenCode reads its global config from ``$XDG_CONFIG_HOME/opencode/opencode.json``; ARES writes that
file into the CLI's private home (the host's config is never seen: HOME and the XDG dirs point
there) and turns off project configs, so a config in the task's repo cannot swap the provider
either. The provider is ``@ai-sdk/openai-compatible`` at the proxy's ``/v1``: OpenCode 1.18 ships
that package inside its binary (its table of bundled providers is consulted before it would ever
``bun add`` a provider into ``~/.cache/opencode``), so nothing is installed at run time and the
sandbox needs no network. Auto-update, sharing, the models.dev catalog fetch, LSP downloads,
default plugins (npm packages fetched at start) and Claude Code's skills/prompts are off;
every tool is allowed without asking (the sandbox is the sandbox).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ares.agents.coding_clis.action_format import CliActionFormat
from ares.agents.coding_clis.definition import CliInvocation, CliPaths, Dialect
from ares.agents.install.npm import NpmPackage

#: The version ARES pins (``$ARES_OPENCODE_VERSION`` overrides it).
PINNED_VERSION = "1.18.33"
#: The provider id ARES's config declares; the model is ``ares/<model>``.
PROVIDER_ID = "ares"
#: The context window and output cap OpenCode is told the policy has (it compacts near the window).
CONTEXT_TOKENS = 128_000
OUTPUT_TOKENS = 16_384
#: Environment switches of OpenCode 1.18 for a quiet, offline, unattended run.
QUIET_ENV = {
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_PROJECT_CONFIG": "1",
    "OPENCODE_DISABLE_CLAUDE_CODE": "1",
    "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1",
    "OPENCODE_DISABLE_TERMINAL_TITLE": "1",
    # OpenCode is a Bun binary; JavaScriptCore sizes its heap by the machine's RAM, not the sandbox's
    # memory limit, and holds ~500 MB after a trivial run. Telling it the machine has 256 MiB makes
    # it collect sooner (~400 MB, measured), which a task with 512 MB needs; it never caps the heap.
    "BUN_JSC_forceRAMSize": str(256 * 1024 * 1024),
}
#: Variables through which an image or a task could hand OpenCode another config or credentials;
#: the command unsets them, so the only config is the file ARES wrote.
FOREIGN_CONFIG_ENV = (
    "OPENCODE_CONFIG", "OPENCODE_CONFIG_DIR", "OPENCODE_CONFIG_CONTENT", "OPENCODE_TUI_CONFIG",
    "OPENCODE_PERMISSION", "OPENCODE_AUTH_CONTENT", "OPENCODE_API_KEY", "OPENCODE_MODELS_URL",
    "OPENCODE_MODELS_PATH", "OPENCODE_SERVER_PASSWORD", "OTEL_EXPORTER_OTLP_ENDPOINT",
)  # fmt: skip


def opencode_config(model: str) -> dict[str, Any]:
    """The ``opencode.json`` ARES writes: one provider (the proxy), every tool allowed, nothing shared."""
    limits = {"context": CONTEXT_TOKENS, "output": OUTPUT_TOKENS}
    entry = {"name": model, "tool_call": True, "attachment": False, "reasoning": False, "limit": limits}
    provider = {
        "npm": "@ai-sdk/openai-compatible",
        "name": "ARES proxy",
        "options": {"baseURL": "{env:ARES_PROXY_URL}", "apiKey": "{env:OPENAI_API_KEY}"},
        "models": {model: entry},
    }
    return {
        "$schema": "https://opencode.ai/config.json",
        "model": f"{PROVIDER_ID}/{model}",
        "small_model": f"{PROVIDER_ID}/{model}",
        "enabled_providers": [PROVIDER_ID],
        "provider": {PROVIDER_ID: provider},
        "autoupdate": False,
        "share": "disabled",
        "snapshot": False,
        "lsp": False,
        "formatter": False,
        "plugin": [],
        "permission": {"*": "allow"},
    }


def bash_arguments(command: str) -> Mapping[str, Any]:
    """OpenCode 1.18's ``bash`` tool: ``command`` (optional ``timeout`` in ms, ``workdir``)."""
    return {"command": command}


@dataclass(frozen=True, slots=True)
class OpenCode:
    """OpenCode at ``version``; ``package`` is its npm install."""

    version: str = PINNED_VERSION
    name: str = "opencode"
    dialect: Dialect = "chat"

    @property
    def package(self) -> NpmPackage:
        # The glibc x64 build (needs AVX2; ``opencode-linux-x64-baseline`` runs on older CPUs). musl
        # images (Alpine) would need ``opencode-linux-x64-musl/bin/opencode``, which npm skips on a
        # glibc host: install with ``--libc=musl`` (or ``--os``/``--cpu``) and glob that package.
        return NpmPackage(
            agent=self.name, package="opencode-ai", version=self.version, command="opencode",
            binary="opencode-linux-x64/bin/opencode",
        )  # fmt: skip

    def invocation(self, paths: CliPaths) -> CliInvocation:
        """``opencode run`` with the instruction on stdin (no argv length limit, no option parsing of
        its text); ``--title`` spares the policy the extra call that would name the session."""
        config = json.dumps(opencode_config(paths.model), indent=2) + "\n"
        model = shlex.quote(f"{PROVIDER_ID}/{paths.model}")
        run = f"{shlex.quote(paths.executable)} run --model {model} --title ares"
        command = f'unset {" ".join(FOREIGN_CONFIG_ENV)}; exec {run} < "$ARES_INSTRUCTION_FILE"'
        # OpenCode also merges an admin's /etc/opencode; its override points that at a dir that is not.
        env = {**QUIET_ENV, "OPENCODE_TEST_MANAGED_CONFIG_DIR": f"{paths.home}/.no-managed-config"}
        return CliInvocation(command=command, files={".config/opencode/opencode.json": config}, env=env)

    def action_format(self) -> CliActionFormat:
        return CliActionFormat(
            cli=self.name, version=self.version, known_version=PINNED_VERSION, shell_tool="bash",
            shell_arguments=bash_arguments,
        )  # fmt: skip


def definition(version: str | None = None) -> OpenCode:
    """OpenCode at ``version`` (default: the pinned one)."""
    return OpenCode(version or PINNED_VERSION)
