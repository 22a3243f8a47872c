"""mini's Model protocol answered by the ARES LLM client: the in-process transport.

Each ``query`` turns mini's messages into the OpenAI chat body LiteLLM would send, reads that as an
``LLMRequest`` (the policy's observation, as the HTTP transport would produce it) and waits, through
the bridge, for the policy's ``LLMResponse``. Actions are parsed and observations rendered by mini's
own helpers, so mini sees exactly what its LiteLLM models would give it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ares.agents.mini_swe import _mini
from ares.agents.mini_swe.bridge import Bridge
from ares.agents.mini_swe.config import Actions
from ares.agents.mini_swe.settings import MiniSettings
from ares.llm.interceptor import LLMClient
from ares.llm.openai_chat import request_from_openai, response_to_openai
from ares.llm.types import LLMRequest, LLMResponse

#: ``model_kwargs`` that configure LiteLLM's transport rather than the model: not sampling, dropped.
TRANSPORT_KWARGS = frozenset(
    {
        "drop_params", "api_base", "base_url", "api_key", "api_version", "custom_llm_provider",
        "timeout", "num_retries", "max_retries", "extra_headers", "caching",
    }
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Function:
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class _ToolCall:
    """The attribute shape mini's tool call parser reads (``id``, ``function.name/arguments``)."""

    id: str
    function: _Function


class AresModel:
    """mini's Model protocol; ``query`` runs in mini's thread and awaits ``llm`` on the episode loop."""

    def __init__(
        self, llm: LLMClient, bridge: Bridge, settings: MiniSettings, *, actions: Actions, model_name: str
    ) -> None:
        self.config: Mapping[str, Any] = {**settings.model, "model_name": model_name}
        self._llm = llm
        self._bridge = bridge
        self._settings = settings
        self._actions = actions
        self._model_name = model_name
        self._sampling = {
            k: v for k, v in settings.model.get("model_kwargs", {}).items() if k not in TRANSPORT_KWARGS
        }
        self.calls = 0

    def request(self, messages: list[dict[str, Any]], **kwargs: Any) -> LLMRequest:
        """The observation for mini's ``messages``: the chat body mini's LiteLLM model would send."""
        body: dict[str, Any] = {
            "model": self._model_name,
            "messages": [{k: v for k, v in m.items() if k != "extra"} for m in messages],
            **self._sampling,
            **{k: v for k, v in kwargs.items() if k not in TRANSPORT_KWARGS},
        }
        if self._actions == "toolcall":
            body["tools"] = [_mini.BASH_TOOL]
        request = request_from_openai(body)
        return replace(request, metadata={"agent": "mini-swe-agent", "turn": self.calls})

    def query(self, messages: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        request = self.request(messages, **kwargs)
        response: LLMResponse = self._bridge.call(lambda: self._llm(request))
        self.calls += 1
        completion = response_to_openai(response)
        cost = {"cost": float(response.cost or 0.0)}
        try:
            actions = self._parse(response)
        except _mini.FormatError as e:  # mini's agent charges and keeps these itself
            e.messages[0]["extra"].update(cost, response=completion)
            raise
        message = dict(completion["choices"][0]["message"])
        message["extra"] = {"actions": actions, "response": completion, **cost, "timestamp": time.time()}
        return message

    def _parse(self, response: LLMResponse) -> list[dict[str, Any]]:
        settings, context = self._settings, {"finish_reason": response.finish_reason}
        if self._actions == "text":
            return _mini.parse_regex_actions(
                response.content or "",
                action_regex=settings.action_regex,
                format_error_template=settings.format_error_template,
                template_kwargs=context,
            )
        calls = [_ToolCall(c.id, _Function(c.name, c.arguments)) for c in response.tool_calls]
        return _mini.parse_toolcall_actions(
            calls, format_error_template=settings.format_error_template, template_kwargs=context
        )

    def format_message(self, **kwargs: Any) -> dict[str, Any]:
        return _mini.expand_multimodal_content(kwargs, pattern=self._settings.multimodal_regex)

    def format_observation_messages(
        self,
        message: dict[str, Any],
        outputs: list[dict[str, Any]],
        template_vars: dict[str, Any] | None = None,
    ) -> list[dict[str, Any]]:
        settings = self._settings
        if self._actions == "text":
            return _mini.format_observation_messages(
                outputs,
                observation_template=settings.observation_template,
                template_vars=template_vars,
                multimodal_regex=settings.multimodal_regex,
            )
        return _mini.format_toolcall_observation_messages(
            actions=message.get("extra", {}).get("actions", []),
            outputs=outputs,
            observation_template=settings.observation_template,
            template_vars=template_vars,
            multimodal_regex=settings.multimodal_regex,
        )

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        return {**self.config, **kwargs}

    def serialize(self) -> dict[str, Any]:
        return {"info": {"config": {"model": dict(self.config), "model_type": "ares (in process)"}}}
