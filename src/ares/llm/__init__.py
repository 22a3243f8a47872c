"""LLM request/response types, wire-format converters, clients and the in-process interceptor."""

from ares.llm.interceptor import AgentFinished, InterceptedLLMClient, LLMClient
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
    "LLMRequest",
    "LLMResponse",
    "Message",
    "SamplingParams",
    "ToolCall",
    "Usage",
    "assistant",
    "system",
    "text_response",
    "user",
]
