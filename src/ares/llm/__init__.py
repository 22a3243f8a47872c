"""LLM request/response types, wire-format converters, clients and the in-process interceptor."""

from ares.llm.interceptor import AgentFinished, InterceptedLLMClient, LLMClient
from ares.llm.openai_chat import (
    request_from_openai,
    request_to_openai,
    response_from_openai,
    response_to_openai,
)
from ares.llm.openai_client import LLMHTTPError, OpenAIChatClient
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
    "request_from_openai",
    "request_to_openai",
    "response_from_openai",
    "response_to_openai",
    "system",
    "text_response",
    "user",
]
