"""The local model's own chat template and tokenizer as a ``TokenRenderer`` (token-exact prompts)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ares.llm.local.client import LocalChatClient
from ares.llm.openai_chat import request_to_openai
from ares.llm.types import LLMRequest


@dataclass(frozen=True, slots=True)
class LocalModelRenderer:
    """Renders and tokenizes exactly as ``client`` does for a request without ids, on the same model
    (loaded on first use; picklable like the client), so a fresh render is what the model would see."""

    client: LocalChatClient

    async def render(self, request: LLMRequest) -> str:
        body = request_to_openai(request)
        return await (await self.client.model()).render(body["messages"], body.get("tools") or ())

    async def tokenize(self, text: str, *, start: bool) -> list[int]:
        return await (await self.client.model()).tokenize(text, add_special=start)

    async def detokenize(self, ids: Sequence[int]) -> str:
        return await (await self.client.model()).detokenize(ids)
