"""Local GGUF models (llama.cpp via xllamacpp, extra ``local``) as token-exact LLM clients."""

from ares.llm.local.client import DEFAULT_MAX_TOKENS, LocalChatClient
from ares.llm.local.default_model import MODEL_INSTALL_COMMAND, default_model_path, installed_default_model
from ares.llm.local.model import (
    ContextOverflowError,
    LocalModel,
    ModelSettings,
    check_gguf,
    load_model,
)
from ares.llm.local.renderer import LocalModelRenderer

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "MODEL_INSTALL_COMMAND",
    "ContextOverflowError",
    "LocalChatClient",
    "LocalModel",
    "LocalModelRenderer",
    "ModelSettings",
    "check_gguf",
    "default_model_path",
    "installed_default_model",
    "load_model",
]
