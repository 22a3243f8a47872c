"""ExternalAgent: any command-line agent, run inside the sandbox, stepped through the LLM proxy.

The agent is a black box: a command that reads the task (on stdin, or from ``$ARES_INSTRUCTION_FILE``)
and calls its LLM over HTTP at ``$OPENAI_BASE_URL`` (OpenAI Chat Completions / Responses) or
``$ANTHROPIC_BASE_URL`` (Anthropic Messages). Each call reaches ARES's ``InterceptionProxy`` and
becomes the environment's observation; the policy's answer goes back as the HTTP response.

Isolation stays as it was: the proxy is served on a TCP socket that the sandbox backend creates on
127.0.0.1 *inside the sandbox's own network namespace* (``LoopbackListener``), bound to this episode's
session only. The sandbox gets no route to the host, no unix socket and no forwarder process; a
sandbox without network still reaches nothing else. Backends that cannot do this (cloud, a remote
Docker engine) fail the episode with a clear error.
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Literal

from ares.agents.base import ActionFormat
from ares.agents.tool_agent import ToolActionFormat
from ares.errors import AgentError
from ares.llm.interceptor import LLMClient
from ares.sandbox.base import ExecResult, Sandbox
from ares.sandbox.capabilities import Capability, LoopbackListener, require, supports
from ares.tasks.model import Task

logger = logging.getLogger(__name__)

#: Where ``ExternalAgentConfig.files`` (and the built-in CLI agent) are uploaded in the sandbox.
INSTALL_DIR = "/tmp/ares-agent"
#: The API key the agent is given: the proxy needs none, but SDKs refuse to start without one.
PLACEHOLDER_API_KEY = "ares-proxy"

#: How much of the command's stdout and stderr the episode keeps (the end of each).
REPORT_TAIL_CHARS = 4000
#: Why ``ExternalAgent.run`` returned: the command exited 0, exited otherwise, or ran out of time.
ExitStatus = Literal["exited", "failed", "timed_out"]


@dataclass(frozen=True, slots=True)
class ExternalAgentConfig:
    """What to run and how. ``command`` is a shell command run in the task's workdir.

    ``files`` are uploaded to ``INSTALL_DIR`` first (the agent's own code, configs). The task's
    instruction goes to the command's stdin when ``instruction_on_stdin``, and is always written to
    ``$ARES_INSTRUCTION_FILE``. ``timeout_s`` bounds the whole run (None: the environment's limits
    only). ``port`` is the proxy's port on the sandbox's loopback (0: any free port).
    """

    command: str
    files: Mapping[str, bytes | str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    instruction_on_stdin: bool = True
    timeout_s: float | None = None
    port: int = 0
    model: str = "policy"

    def __post_init__(self) -> None:
        if not self.command.strip():
            raise ValueError("ExternalAgentConfig.command is empty")
        if self.timeout_s is not None and not self.timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0 or None, got {self.timeout_s}")
        if not 0 <= self.port < 65536:
            raise ValueError(f"port must be in 0..65535, got {self.port}")


class ExternalAgent:
    """Runs ``config.command`` in the sandbox with its LLM endpoints pointed at this episode's session.

    ``result`` is the command's ExecResult once it ended; ``exit_status`` says how it ended; ``calls``
    counts the LLM calls the policy answered.
    """

    def __init__(self, sandbox: Sandbox, llm: LLMClient, task: Task, config: ExternalAgentConfig) -> None:
        self.sandbox = sandbox
        self.llm = llm
        self.task = task
        self.config = config
        self.result: ExecResult | None = None
        self.exit_status: ExitStatus | None = None
        self.calls = 0
        #: More facts for ``report`` (a CLI agent adds its name, version and the files it wrote).
        self.extra_report: dict[str, object] = {}

    @property
    def report(self) -> dict[str, object]:
        """How the command ended, kept on the episode (``metadata["agent"]``): exit code and status,
        the tails of its stdout and stderr, the LLM calls it made."""
        if self.result is None:
            return {"exit_status": "not_ended", "llm_calls": self.calls, **self.extra_report}
        result = self.result
        return {
            "exit_status": self.exit_status, "exit_code": result.exit_code,
            "duration_s": round(result.duration_s, 3), "llm_calls": self.calls,
            "stdout_tail": result.stdout[-REPORT_TAIL_CHARS:],
            "stderr_tail": result.stderr[-REPORT_TAIL_CHARS:],
            **self.extra_report,
        }  # fmt: skip

    async def run(self) -> None:
        from ares.proxy import InterceptionProxy  # the proxy extra (aiohttp) is needed only here

        sandbox, config = self.sandbox, self.config
        if not supports(sandbox, Capability.LOOPBACK):
            raise AgentError(
                f"{type(sandbox).__name__} cannot serve the LLM proxy on the sandbox's loopback, so an "
                "external agent cannot run in it; use the local or a local Docker/Podman sandbox"
            )
        listener = require(sandbox, Capability.LOOPBACK, LoopbackListener)
        sock = await listener.listen_loopback(config.port)
        port = sock.getsockname()[1]
        async with InterceptionProxy() as proxy:
            session = proxy.open_session(self.llm, model=config.model)
            try:
                served = await proxy.serve_socket(sock, session)
            except BaseException:
                sock.close()
                raise
            try:
                await self._run_command(port)
            finally:
                self.calls = session.calls_served
                await served.close()
                session.close("the external agent's run ended")

    async def _run_command(self, port: int) -> None:
        config, task = self.config, self.task
        instruction_file = f"{INSTALL_DIR}/instruction.md"
        await self.sandbox.upload({**config.files, "instruction.md": task.instruction}, INSTALL_DIR)
        env = {
            "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1",
            "OPENAI_API_KEY": PLACEHOLDER_API_KEY,
            "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}",
            "ANTHROPIC_API_KEY": PLACEHOLDER_API_KEY,
            "ARES_INSTRUCTION_FILE": instruction_file,
            "ARES_AGENT_DIR": INSTALL_DIR,
            **config.env,
        }
        stdin = task.instruction.encode() if config.instruction_on_stdin else None
        result = await self.sandbox.exec(
            config.command, cwd=task.workdir, env=env, timeout_s=config.timeout_s, stdin=stdin
        )
        self.result = result
        ended_ok = result.exit_code == 0 and not result.timed_out
        self.exit_status = "timed_out" if result.timed_out else "exited" if ended_ok else "failed"
        if self.exit_status != "exited":
            logger.info(
                "external agent %s after %.1f s (exit code %d): %s",
                self.exit_status, result.duration_s, result.exit_code, result.stderr[-2000:],
            )  # fmt: skip


class ExternalAgentFactory:
    """One ExternalAgent per episode; ``action_format`` is how scripted policies speak to the agent
    (it depends on the agent: give the one that matches, or None for LLM policies only)."""

    def __init__(self, config: ExternalAgentConfig, action_format: ActionFormat | None = None) -> None:
        self.config = config
        if action_format is not None:
            self.action_format = action_format

    def __call__(self, *, sandbox: Sandbox, llm: LLMClient, task: Task) -> ExternalAgent:
        return ExternalAgent(sandbox, llm, task, self.config)


Dialect = Literal["chat", "responses", "anthropic"]


def tool_loop_cli(api: Dialect = "chat", **options: str) -> ExternalAgentFactory:
    """The CLI agent ARES ships (``tool_loop_cli.py``, stdlib only), speaking ``api`` to the proxy.

    Its tools are the tool-calling agent's ``bash`` and ``submit``, so oracle/null/scripted policies
    drive it through ``ToolActionFormat``. ``options`` become its flags (``max_turns="20"``...).
    """
    source = (resources.files("ares.agents.external") / "tool_loop_cli.py").read_text(encoding="utf-8")
    flags = " ".join(f"--{k.replace('_', '-')} {shlex.quote(v)}" for k, v in options.items())
    command = f"python3 {INSTALL_DIR}/tool_loop_cli.py --api {api} {flags}".rstrip()
    config = ExternalAgentConfig(command=command, files={"tool_loop_cli.py": source})
    return ExternalAgentFactory(config, ToolActionFormat())
