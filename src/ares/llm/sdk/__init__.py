"""LLM clients on the vendors' official SDKs (optional extras ``openai`` and ``anthropic``).

- ``ares.llm.sdk.openai_sdk``: ``OpenAIChatSDKClient`` (Chat Completions) and
  ``OpenAIResponsesSDKClient`` (Responses API), through ``openai.AsyncOpenAI``;
- ``ares.llm.sdk.anthropic_sdk``: ``AnthropicSDKClient`` (Messages), through ``anthropic.AsyncAnthropic``;
- ``ares.llm.sdk.pricing``: ``Price``, the user-supplied rates that turn token usage into cost.

The vendor modules are not imported here, so ``import ares.llm.sdk`` never needs an SDK.
"""

from ares.llm.sdk.pricing import Price, Prices, TokenCounts

__all__ = ["Price", "Prices", "TokenCounts"]
