"""Local GGUF models (llama.cpp via xllamacpp, extra ``local``) as token-exact LLM clients."""

from ares.llm.local.client import DEFAULT_MAX_TOKENS, LocalChatClient
from ares.llm.local.model import (
    ContextOverflowError,
    LocalModel,
    ModelSettings,
    check_gguf,
    default_model_path,
    load_model,
)
from ares.llm.local.renderer import LocalModelRenderer

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "ContextOverflowError",
    "LocalChatClient",
    "LocalModel",
    "LocalModelRenderer",
    "ModelSettings",
    "check_gguf",
    "default_model_path",
    "load_model",
]
