"""A client for Anthropic's Messages API through the official ``anthropic`` SDK.

Needs the ``anthropic`` extra (``pip install 'ares[anthropic]'``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ares.llm import anthropic_messages
from ares.llm.sdk.base import SDKClient, missing_sdk
from ares.llm.sdk.pricing import TokenCounts
from ares.llm.types import LLMRequest, LLMResponse, Usage

#: ``max_tokens`` when neither the agent nor the client sets one: the Messages API requires it.
DEFAULT_MAX_TOKENS = 4096


class AnthropicSDKClient(SDKClient):
    """Messages (``/v1/messages``) through ``anthropic.AsyncAnthropic``; see ``SDKClient``.

    Cost: ``cache_read_input_tokens`` at ``Price.cache_read`` and ``cache_creation_input_tokens`` at
    ``Price.cache_write`` (Anthropic's ``input_tokens`` already leaves both out).
    """

    vendor: ClassVar[str] = "Anthropic"
    policy: ClassVar[str] = "anthropic"
    default_base_url: ClassVar[str] = "https://api.anthropic.com"
    key_env: ClassVar[str] = "ANTHROPIC_API_KEY"
    base_url_env: ClassVar[str] = "ANTHROPIC_BASE_URL"
    model_env: ClassVar[str] = "ANTHROPIC_MODEL"

    @staticmethod
    def _sdk_module() -> Any:
        try:
            import anthropic
        except ImportError:
            raise missing_sdk("anthropic") from None
        return anthropic

    def _new_sdk(self, api_key: str) -> Any:
        return self._sdk_module().AsyncAnthropic(
            api_key=api_key, base_url=self.base_url, timeout=self.timeout_s, max_retries=self.max_retries
        )

    def request_body(self, request: LLMRequest) -> dict[str, Any]:
        body = super().request_body(request)
        body.setdefault("max_tokens", DEFAULT_MAX_TOKENS)
        return body

    def _render(self, request: LLMRequest) -> dict[str, Any]:
        return anthropic_messages.strip_extensions(anthropic_messages.request_to_anthropic(request))

    async def _create(self, sdk: Any, body: dict[str, Any]) -> Any:
        rest = dict(body)
        typed = {key: rest.pop(key) for key in ("model", "max_tokens", "messages")}
        raw = await sdk.messages.with_raw_response.create(**typed, extra_body=rest)
        return raw.http_response

    def _parse(self, wire: Any) -> LLMResponse:
        return anthropic_messages.response_from_anthropic(wire)

    def _token_counts(self, usage: Usage) -> TokenCounts:
        def count(key: str) -> int:
            value = usage.extra.get(key) if isinstance(usage.extra, Mapping) else None
            return value if isinstance(value, int) and not isinstance(value, bool) else 0

        return TokenCounts(
            usage.prompt_tokens,
            usage.completion_tokens,
            cache_read=count("cache_read_input_tokens"),
            cache_write=count("cache_creation_input_tokens"),
        )
