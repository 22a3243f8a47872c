"""A coding CLI as an ARES agent: installed into an add-on layer, run headless, stepped via the proxy.

``CliAgentFactory`` carries the CLI's add-on layer (``addons``: the environment lays it over every
task image, installed once per version into ARES's cache) and builds an ``ExternalAgent`` per
episode whose HOME is a fresh private dir holding only the config ARES wrote. The episode keeps the
CLI's exit, the tails of its output and the list of files it wrote into its home (its own session
logs), in ``metadata["agent"]``.
"""

from __future__ import annotations

import shlex

from ares.agents.base import ActionFormat
from ares.agents.coding_clis.definition import CliDefinition, CliPaths
from ares.agents.external.agent import INSTALL_DIR, ExternalAgent, ExternalAgentConfig
from ares.agents.install.npm import npm_addon
from ares.llm.interceptor import LLMClient
from ares.sandbox.addons import AddonLayer
from ares.sandbox.base import Sandbox
from ares.tasks.model import Task

#: The CLI's private home in the sandbox (HOME, XDG dirs and its own config dir live here).
CLI_HOME = f"{INSTALL_DIR}/home"
#: The most files of its home the episode lists.
MAX_LISTED_FILES = 200
#: Model name the CLI is told to use; the policy answers whatever it is.
DEFAULT_MODEL = "ares-policy"


class CliAgent(ExternalAgent):
    """An ExternalAgent that also lists the files the CLI left in its home."""

    def __init__(
        self,
        sandbox: Sandbox,
        llm: LLMClient,
        task: Task,
        config: ExternalAgentConfig,
        definition: CliDefinition,
    ) -> None:
        super().__init__(sandbox, llm, task, config)
        package = definition.package
        self.extra_report = {"cli": definition.name, "version": package.version, "package": package.package}

    async def run(self) -> None:
        try:
            await super().run()
        finally:
            if self.result is not None:
                self.extra_report["home_files"] = await self._home_files()

    async def _home_files(self) -> list[str]:
        listing = f"find . -type f -printf '%P %s\\n' | sort | head -n {MAX_LISTED_FILES}"
        found = await self.sandbox.exec(f"cd {shlex.quote(CLI_HOME)} && {listing}", timeout_s=30)
        return found.stdout.splitlines() if found.exit_code == 0 else []


class CliAgentFactory:
    """Builds one ``CliAgent`` per episode for ``definition``; ``timeout_s`` bounds each CLI run."""

    def __init__(
        self, definition: CliDefinition, *, timeout_s: float | None = 1800.0, model: str = DEFAULT_MODEL
    ) -> None:
        self.definition = definition
        self.timeout_s = timeout_s
        self.model = model
        self.addons: tuple[AddonLayer, ...] = (npm_addon(definition.package),)
        self.action_format: ActionFormat = definition.action_format()

    def __call__(self, *, sandbox: Sandbox, llm: LLMClient, task: Task) -> CliAgent:
        definition = self.definition
        paths = CliPaths(
            executable=definition.package.executable, home=CLI_HOME, workdir=task.workdir,
            instruction_file=f"{INSTALL_DIR}/instruction.md", model=self.model,
        )  # fmt: skip
        run = definition.invocation(paths)
        files = {f"home/{rel}": text for rel, text in run.files.items()}
        env = {
            "HOME": CLI_HOME, "XDG_CONFIG_HOME": f"{CLI_HOME}/.config",
            "XDG_DATA_HOME": f"{CLI_HOME}/.local/share", "XDG_CACHE_HOME": f"{CLI_HOME}/.cache",
            "XDG_STATE_HOME": f"{CLI_HOME}/.local/state",
            **run.env,
        }  # fmt: skip
        prelude = 'export ARES_PROXY_URL="$OPENAI_BASE_URL" ARES_PROXY_ORIGIN="$ANTHROPIC_BASE_URL"; '
        config = ExternalAgentConfig(
            command=prelude + run.command, files=files, env=env, instruction_on_stdin=False,
            timeout_s=self.timeout_s, model=self.model,
        )  # fmt: skip
        return CliAgent(sandbox, llm, task, config, definition)
