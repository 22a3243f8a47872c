"""Clients for OpenAI's Chat Completions and Responses APIs through the official ``openai`` SDK.

Needs the ``openai`` extra (``pip install 'ares[openai]'``). Chat works with any compatible server
(vLLM, SGLang, ...) via ``base_url``; Responses with OpenAI and the servers that implement it.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ares.llm import openai_chat, openai_responses
from ares.llm.client_common import chat_max_tokens_key
from ares.llm.sdk.base import SDKClient, cached_tokens, missing_sdk
from ares.llm.sdk.pricing import TokenCounts
from ares.llm.types import LLMRequest, LLMResponse, Usage


class _OpenAISDKClient(SDKClient):
    vendor: ClassVar[str] = "OpenAI"
    default_base_url: ClassVar[str] = "https://api.openai.com/v1"
    key_env: ClassVar[str] = "OPENAI_API_KEY"
    base_url_env: ClassVar[str] = "OPENAI_BASE_URL"
    model_env: ClassVar[str] = "OPENAI_MODEL"
    #: The ``Usage.extra`` key whose ``cached_tokens`` are billed at ``Price.cache_read``.
    cached_details: ClassVar[str]

    @staticmethod
    def _sdk_module() -> Any:
        try:
            import openai
        except ImportError:
            raise missing_sdk("openai") from None
        return openai

    def _new_sdk(self, api_key: str) -> Any:
        return self._sdk_module().AsyncOpenAI(
            api_key=api_key, base_url=self.base_url, timeout=self.timeout_s, max_retries=self.max_retries
        )

    def _token_counts(self, usage: Usage) -> TokenCounts:
        cached = cached_tokens(usage, self.cached_details)
        return TokenCounts(usage.prompt_tokens - cached, usage.completion_tokens, cache_read=cached)


class OpenAIChatSDKClient(_OpenAISDKClient):
    """Chat Completions (``/chat/completions``) through ``openai.AsyncOpenAI``; see ``SDKClient``.

    Cost: cached prompt tokens (``prompt_tokens_details.cached_tokens``) at ``Price.cache_read``.
    """

    policy: ClassVar[str] = "openai-sdk"
    cached_details: ClassVar[str] = "prompt_tokens_details"
    stream_keys: ClassVar[tuple[str, ...]] = ("stream", "stream_options")

    def _max_tokens_key(self, body: Any) -> str:
        return chat_max_tokens_key(body)

    def _render(self, request: LLMRequest) -> dict[str, Any]:
        return openai_chat.strip_extensions(openai_chat.request_to_openai(request))

    async def _create(self, sdk: Any, body: dict[str, Any]) -> Any:
        rest = dict(body)
        model, messages = rest.pop("model"), rest.pop("messages")
        completions = sdk.chat.completions.with_raw_response
        raw = await completions.create(model=model, messages=messages, extra_body=rest)
        return raw.http_response

    def _parse(self, wire: Any) -> LLMResponse:
        return openai_chat.response_from_openai(wire)


class OpenAIResponsesSDKClient(_OpenAISDKClient):
    """The Responses API (``/responses``) through ``openai.AsyncOpenAI``; see ``SDKClient``.

    Each call is stateless (the whole conversation is sent; no ``previous_response_id``), as an
    episode's transcript is the agent's. Cost: ``input_tokens_details.cached_tokens`` at
    ``Price.cache_read``.
    """

    policy: ClassVar[str] = "openai-responses"
    cached_details: ClassVar[str] = "input_tokens_details"
    max_tokens_key: ClassVar[str] = "max_output_tokens"

    def _render(self, request: LLMRequest) -> dict[str, Any]:
        return openai_responses.strip_extensions(openai_responses.request_to_responses(request))

    async def _create(self, sdk: Any, body: dict[str, Any]) -> Any:
        rest = dict(body)
        typed = {key: rest.pop(key) for key in ("model", "input") if key in rest}
        raw = await sdk.responses.with_raw_response.create(**typed, extra_body=rest)
        return raw.http_response

    def _parse(self, wire: Any) -> LLMResponse:
        return openai_responses.response_from_responses(wire)
