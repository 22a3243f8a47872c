"""mini-swe-agent's own agent loop as an ARES code agent.

mini's ``DefaultAgent`` runs unchanged in a worker thread (see ``bridge``); ARES plugs in at mini's two
seams: its Model (the ARES LLM client in process, or mini's LiteLLM model through the interception
proxy over HTTP) and its Environment (the episode's sandbox). The prompt the policy sees is mini's,
rendered from mini's config file.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from ares.agents.mini_swe import _mini
from ares.agents.mini_swe.action_format import MiniSweActionFormat
from ares.agents.mini_swe.bridge import THREAD_PREFIX, Bridge, EpisodeClosed, run_in_thread
from ares.agents.mini_swe.config import MiniSweConfig
from ares.agents.mini_swe.environment import SandboxEnvironment
from ares.agents.mini_swe.model import AresModel
from ares.agents.mini_swe.settings import MiniSettings, load_settings
from ares.errors import AgentError, AresError, LLMError
from ares.llm.interceptor import LLMClient
from ares.sandbox.base import Sandbox
from ares.tasks.model import Task

if TYPE_CHECKING:
    from ares.proxy import InterceptionProxy

#: mini's exit statuses in the words ARES episodes use for why an agent stopped by itself.
_EXIT_STATUSES = {
    "Submitted": "submitted",
    "RepeatedFormatError": "format_errors",
    "TimeExceeded": "time_limit",
}


class MiniSweAgent:
    """One episode of mini-swe-agent. After ``run``: ``exit_status``, ``submission`` and ``messages``
    (mini's trajectory, as mini keeps it)."""

    def __init__(
        self,
        sandbox: Sandbox,
        llm: LLMClient,
        task: Task,
        config: MiniSweConfig,
        settings: MiniSettings,
        proxy: InterceptionProxy | None = None,
    ) -> None:
        self.sandbox = sandbox
        self.llm = llm
        self.task = task
        self.config = config
        self.settings = settings
        self.exit_status: str | None = None
        self.submission: str | None = None
        self.messages: list[dict[str, Any]] = []
        self._proxy = proxy

    async def run(self) -> None:
        """mini's loop until it exits; LLM and sandbox errors propagate, cancellation stops the thread."""
        bridge = Bridge(asyncio.get_running_loop())
        env = SandboxEnvironment(self.sandbox, self.task, bridge, self.settings.env_vars)
        if self.config.transport == "in_process":
            model = AresModel(
                self.llm, bridge, self.settings, actions=self.config.actions, model_name=self.config.model
            )
            await self._drive(model, env, bridge.close)
            return
        from ares.agents.mini_swe.http import proxied_model

        async with self._session() as session:
            model = proxied_model(
                self.settings,
                actions=self.config.actions,
                model_name=self.config.model,
                base_url=session.openai_base_url,
            )

            def stop() -> None:
                bridge.close()
                session.close("the episode ended")

            await self._drive(model, env, stop)

    async def _drive(self, model: Any, env: SandboxEnvironment, stop: Callable[[], None]) -> None:
        agent = _mini.DefaultAgent(model, env, **self.settings.agent)
        try:
            name = f"{THREAD_PREFIX}-{self.task.id}"
            result = await run_in_thread(lambda: agent.run(self.task.instruction), name=name, on_cancel=stop)
        except EpisodeClosed:
            raise asyncio.CancelledError("the episode ended while mini-swe-agent was waiting") from None
        except AresError:
            raise
        except Exception as exc:
            raise self._foreign(exc) from exc
        finally:
            self.messages = agent.messages
        status = str(result.get("exit_status", ""))
        if status == "LimitsExceeded":
            step_limit = agent.config.step_limit
            status = "step_limit" if 0 < step_limit <= agent.n_calls else "cost_limit"
        self.exit_status = _EXIT_STATUSES.get(status, status)
        self.submission = result.get("submission")

    def _foreign(self, exc: Exception) -> AresError:
        """An error from mini or LiteLLM as the ARES error it stands for."""
        if type(exc).__module__.split(".")[0] in ("litellm", "openai", "httpx"):
            return LLMError(f"mini-swe-agent's model call through the ARES proxy failed: {exc}")
        return AgentError(f"mini-swe-agent failed: {type(exc).__name__}: {exc}")

    @contextlib.asynccontextmanager
    async def _session(self) -> AsyncIterator[Any]:
        """A proxy session for this episode: on the factory's proxy, else on a proxy of its own."""
        from ares.proxy import InterceptionProxy

        if self._proxy is not None:
            with self._proxy.open_session(self.llm, model=self.config.model) as session:
                yield session
            return
        # The policy's time is the environment's to limit, not the proxy's.
        async with InterceptionProxy(call_timeout_s=None) as proxy:
            with proxy.open_session(self.llm, model=self.config.model) as session:
                yield session


class MiniSweAgentFactory:
    """Builds a ``MiniSweAgent`` per episode; mini's config is loaded and checked once, here.

    ``MiniSweAgentFactory(transport="http")`` is short for ``MiniSweAgentFactory(MiniSweConfig(transport=
    "http"))``. ``proxy``: an started ``InterceptionProxy`` to open the HTTP sessions on (its owner
    stops it); without one each HTTP episode runs a proxy of its own.
    """

    def __init__(
        self, config: MiniSweConfig | None = None, *, proxy: InterceptionProxy | None = None, **options: Any
    ) -> None:
        config = config if config is not None else MiniSweConfig()
        self.config = dataclasses.replace(config, **options) if options else config
        if proxy is not None and self.config.transport != "http":
            raise ValueError("a proxy is only used with transport='http'")
        self.settings = load_settings(self.config)
        self.action_format = MiniSweActionFormat(self.config.actions, self.settings.action_regex)
        self._proxy = proxy
        if self.config.transport == "http":
            from ares.agents.mini_swe import http  # noqa: F401  (fail now if LiteLLM or the proxy is missing)
            from ares.proxy import InterceptionProxy  # noqa: F401

    def __call__(self, *, sandbox: Sandbox, llm: LLMClient, task: Task) -> MiniSweAgent:
        return MiniSweAgent(sandbox, llm, task, self.config, self.settings, self._proxy)
