"""Prompts that extend the previous prompt and completion token for token.

Agents keep only the text of a reply, so a prompt re-rendered from text need not start with the
tokens the policy was fed and sampled one step earlier: the trajectory an RL trainer sees would be
off-policy at every turn boundary. ``TokenExactClient`` sits between the agent and the environment's
client and fills ``LLMRequest.prompt_token_ids`` itself: when the new prompt's text starts with the
previous prompt's text plus the completion's text, the ids are the previous prompt ids, the
completion ids exactly as sampled, and the tokens of what the template adds after them (the turn's
end, the new messages, the generation prompt). Otherwise (first call, history rewritten, a template
that renders old turns differently, a completion without ids) the prompt is rendered and tokenized
afresh, and ``metadata[PREFIX_KEY]`` says which of the two happened, so a trainer can see exactly
where the prefix property breaks.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final, Literal

from ares.llm.interceptor import LLMClient
from ares.llm.tokens.renderer import TokenRenderer
from ares.llm.types import LLMRequest, LLMResponse

#: ``LLMRequest.metadata`` key: "extended" (ids = previous prompt + completion + new tokens), "reset"
#: (rendered afresh) or "given" (the agent sent its own ids; passed on untouched).
PREFIX_KEY: Final = "ares_token_prefix"
PrefixMark = Literal["extended", "reset", "given"]


@dataclass(frozen=True, slots=True)
class _Context:
    """What the model has seen so far: the text and the exact ids that stand for it."""

    text: str
    ids: tuple[int, ...]


class TokenExactClient:
    """An ``LLMClient`` for one episode's agent that gives every request token-exact prompt ids.

    ``resume``: the observation a snapshot was taken at; the restored agent's first request, equal to
    it but for the token fields, gets its ids back, so restored episodes stay token exact.
    """

    __slots__ = ("_context", "_counted", "_inner", "_renderer", "_resume")

    def __init__(
        self, inner: LLMClient, renderer: TokenRenderer, *, resume: LLMRequest | None = None
    ) -> None:
        self._inner = inner
        self._renderer = renderer
        self._context: _Context | None = None
        self._resume = resume
        self._counted: tuple[LLMRequest, _Context, PrefixMark] | None = None

    async def count_prompt_tokens(self, request: LLMRequest) -> int:
        """How many prompt ids ``request`` would be sent with if it were the next call (exact: the
        same extension of the previous prompt + completion). A context budget decides on it."""
        if request.prompt_token_ids is not None:
            return len(request.prompt_token_ids)
        prompt, mark = await self._prompt(request, self._context)
        self._counted = (request, prompt, mark)  # the call that follows reuses it
        return len(prompt.ids)

    async def __call__(self, request: LLMRequest) -> LLMResponse:
        before, self._context = self._context, None  # a call that fails or is cancelled leaves none
        resume, self._resume = self._resume, None
        counted, self._counted = self._counted, None
        if request.prompt_token_ids is not None:
            return await self._inner(_marked(request, "given"))
        if resume is not None and resume.prompt_token_ids is not None and _same_but_tokens(request, resume):
            request = resume
            prompt = _Context(await self._renderer.render(request), resume.prompt_token_ids)
        else:
            if counted is not None and counted[0] == request:
                prompt, mark = counted[1], counted[2]
            else:
                prompt, mark = await self._prompt(request, before)
            request = replace(_marked(request, mark), prompt_token_ids=prompt.ids)
        response = await self._inner(request)
        if response.token_ids is not None:
            completion = await self._renderer.detokenize(response.token_ids)
            self._context = _Context(prompt.text + completion, prompt.ids + tuple(response.token_ids))
        return response

    async def _prompt(self, request: LLMRequest, before: _Context | None) -> tuple[_Context, PrefixMark]:
        text = await self._renderer.render(request)
        if before is not None and text.startswith(before.text):
            rest = await self._renderer.tokenize(text[len(before.text) :], start=False)
            return _Context(text, before.ids + tuple(rest)), "extended"
        return _Context(text, tuple(await self._renderer.tokenize(text, start=True))), "reset"


def _marked(request: LLMRequest, mark: PrefixMark) -> LLMRequest:
    return replace(request, metadata={**request.metadata, PREFIX_KEY: mark})


def _same_but_tokens(request: LLMRequest, observation: LLMRequest) -> bool:
    """Whether ``request`` is ``observation`` as the agent built it, before this client added ids."""
    metadata = {k: v for k, v in observation.metadata.items() if k != PREFIX_KEY}
    return replace(observation, prompt_token_ids=None, metadata=metadata) == request
