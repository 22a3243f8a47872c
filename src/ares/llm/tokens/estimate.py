"""A prompt's length in tokens without a tokenizer: what budgets fall back on for text policies."""

from __future__ import annotations

from ares.llm.types import LLMRequest

#: Characters per token: the usual average for English prose and code under BPE vocabularies.
CHARS_PER_TOKEN = 4


def estimated_prompt_tokens(request: LLMRequest) -> int:
    """Prompt length in tokens: exact from ``prompt_token_ids``, else characters / 4, rounded up."""
    if request.prompt_token_ids is not None:
        return len(request.prompt_token_ids)
    chars = len(request.system_prompt or "")
    for message in request.messages:
        chars += len(message.text) + sum(len(call.arguments) + len(call.name) for call in message.tool_calls)
    return -(-chars // CHARS_PER_TOKEN)
