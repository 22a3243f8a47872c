"""LLM request/response types, wire-format converters, clients and the in-process interceptor."""

from ares.llm._wire import PROMPT_TOKEN_IDS_KEY
from ares.llm.anthropic_messages import (
    request_from_anthropic,
    request_to_anthropic,
    response_from_anthropic,
    response_to_anthropic,
)
from ares.llm.interceptor import AgentFinished, InterceptedLLMClient, LLMClient
from ares.llm.openai_chat import (
    request_from_openai,
    request_to_openai,
    response_from_openai,
    response_to_openai,
)
from ares.llm.openai_client import LLMHTTPError, OpenAIChatClient
from ares.llm.openai_responses import (
    request_from_responses,
    request_to_responses,
    response_from_responses,
    response_to_responses,
)
from ares.llm.types import (
    LLMRequest,
    LLMResponse,
    Message,
    SamplingParams,
    ToolCall,
    Usage,
    assistant,
    system,
    text_response,
    user,
)

__all__ = [
    "PROMPT_TOKEN_IDS_KEY",
    "AgentFinished",
    "InterceptedLLMClient",
    "LLMClient",
    "LLMHTTPError",
    "LLMRequest",
    "LLMResponse",
    "Message",
    "OpenAIChatClient",
    "SamplingParams",
    "ToolCall",
    "Usage",
    "assistant",
    "request_from_anthropic",
    "request_from_openai",
    "request_from_responses",
    "request_to_anthropic",
    "request_to_openai",
    "request_to_responses",
    "response_from_anthropic",
    "response_from_openai",
    "response_from_responses",
    "response_to_anthropic",
    "response_to_openai",
    "response_to_responses",
    "system",
    "text_response",
    "user",
]
