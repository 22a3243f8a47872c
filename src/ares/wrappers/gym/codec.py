"""How observations and actions look on the gymnasium side.

Observations: ``"object"`` (the ``LLMRequest`` itself), ``"messages"`` (OpenAI chat message dicts,
system prompt first) or ``"tokens"`` (a 1-D int64 array: the request's own ``prompt_token_ids`` when
it has them, else the ids the tokenizer's own chat template gives it, or ``tokenizer.encode`` of an
explicit ``render=``'s text: every model family formats prompts its own way, so none is assumed).
Actions: ``"object"`` (an ``LLMResponse``), ``"text"`` (the assistant's reply as a ``str``) or
``"tokens"`` (generated ids, decoded with the tokenizer; the ids are kept on the response's
``token_ids``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, get_args, runtime_checkable

import numpy as np
from gymnasium.spaces import Space

from ares.llm.openai_chat import request_to_openai
from ares.llm.types import LLMRequest, LLMResponse
from ares.wrappers.gym.render import chatml, has_chat_template, template_ids
from ares.wrappers.gym.spaces import (
    UNKNOWN_VOCAB_SIZE,
    ChatMessagesSpace,
    LLMRequestSpace,
    LLMResponseSpace,
    TextSpace,
    token_ids_space,
)
from ares.wrappers.wellformed import response_ok

ObservationMode = Literal["object", "messages", "tokens"]
ActionMode = Literal["object", "text", "tokens"]
OBSERVATION_MODES: tuple[str, ...] = get_args(ObservationMode)
ACTION_MODES: tuple[str, ...] = get_args(ActionMode)

PromptRender = Callable[[LLMRequest], str]
"""A request as prompt text for ``Tokenizer.encode``: the opt-out from the tokenizer's chat template."""
NAMED_RENDERS: Mapping[str, PromptRender] = {"chatml": chatml}


@runtime_checkable
class Tokenizer(Protocol):
    """What the token renderings need; Hugging Face tokenizers fit (``len()`` gives the vocabulary).

    For ``observation="tokens"`` the tokenizer must also render chats itself: an
    ``apply_chat_template(messages, *, tools, add_generation_prompt, tokenize)`` method returning ids
    (``render.ChatTemplated``; Hugging Face's, or your own), unless ``make_codec`` gets ``render=``.
    """

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...


def vocab_size_of(tokenizer: Tokenizer | None) -> int:
    """``len(tokenizer)`` (added tokens included), else its ``vocab_size``, else the int32 range."""
    if tokenizer is None:
        return UNKNOWN_VOCAB_SIZE
    if hasattr(tokenizer, "__len__"):
        return len(tokenizer)  # type: ignore[arg-type]
    size = getattr(tokenizer, "vocab_size", None)
    return int(size) if isinstance(size, int) else UNKNOWN_VOCAB_SIZE


@dataclass(frozen=True, slots=True)
class Codec:
    """Turns ``LLMRequest``s into observations and actions into ``LLMResponse``s, with their spaces."""

    observation: ObservationMode
    action: ActionMode
    tokenizer: Tokenizer | None
    observation_space: Space[Any]
    action_space: Space[Any]
    render: PromptRender | None = None  # None: the tokenizer's chat template renders prompts

    def observe(self, request: LLMRequest) -> Any:
        """The observation for ``request``: the frozen request itself, or new lists/arrays on every call
        (callers may keep or mutate them)."""
        if self.observation == "object":
            return request
        if self.observation == "messages":
            return request_to_openai(request)["messages"]
        return np.asarray(self._prompt_ids(request), dtype=np.int64)

    def act(self, action: Any) -> LLMResponse:
        """The ``LLMResponse`` an action stands for; a wrong type or shape raises, naming the form."""
        if self.action == "object":
            if not isinstance(action, LLMResponse):
                raise TypeError(f"action='object' expects an ares.LLMResponse, got {type(action).__name__}")
            if not response_ok(action):
                raise ValueError(
                    "the LLMResponse is malformed: content must be str or None, tool_calls a tuple of "
                    f"ToolCall, token_ids a tuple of non-negative ints (got {action!r:.300})"
                )
            return action
        if self.action == "text":
            if not isinstance(action, str):
                raise TypeError(
                    f"action='text' expects a str (the assistant's reply), got {type(action).__name__}"
                )
            return LLMResponse(content=action)
        ids = self._action_ids(action)
        assert self.tokenizer is not None  # make_codec refuses action="tokens" without one
        return LLMResponse(content=self.tokenizer.decode(list(ids)), token_ids=ids)

    def _prompt_ids(self, request: LLMRequest) -> tuple[int, ...] | list[int]:
        if request.prompt_token_ids is not None:
            return request.prompt_token_ids
        if self.tokenizer is None:
            raise ValueError(
                "observation='tokens': this request carries no prompt_token_ids; pass tokenizer=... "
                "(with encode/decode and a chat template) so the wrapper can render its prompt"
            )
        if self.render is not None:
            return self.tokenizer.encode(self.render(request))
        assert has_chat_template(self.tokenizer)  # make_codec refuses a tokenizer without a template
        return template_ids(self.tokenizer, request)  # type: ignore[arg-type]

    def _action_ids(self, action: Any) -> tuple[int, ...]:
        expected = "action='tokens' expects a 1-D sequence of int token ids (list, tuple or integer array)"
        if isinstance(action, str | bytes) or not isinstance(action, list | tuple | np.ndarray):
            raise TypeError(f"{expected}, got {type(action).__name__}")
        array = np.asarray(action)
        if array.size == 0:
            array = array.astype(np.int64)
        if array.ndim != 1:
            raise ValueError(f"{expected}, got an array of shape {array.shape}")
        if not np.issubdtype(array.dtype, np.integer):
            raise TypeError(f"{expected}, got elements of dtype {array.dtype}")
        vocab = vocab_size_of(self.tokenizer)
        if array.size and (array.min() < 0 or array.max() >= vocab):
            raise ValueError(
                f"token ids must lie in [0, {vocab}), got min {array.min()} and max {array.max()}"
            )
        return tuple(int(t) for t in array)


def _prompt_render(
    observation: ObservationMode, tokenizer: Tokenizer | None, render: PromptRender | str | None
) -> PromptRender | None:
    if isinstance(render, str):
        if render not in NAMED_RENDERS:
            raise ValueError(f"render must be one of {sorted(NAMED_RENDERS)} or a function, got {render!r}")
        render = NAMED_RENDERS[render]
    if render is not None and not callable(render):
        raise TypeError(f"render must be a function LLMRequest -> str or a name, got {render!r}")
    if render is not None and (observation != "tokens" or tokenizer is None):
        raise ValueError(
            "render= renders prompts for observation='tokens' and needs tokenizer= to encode them"
        )
    if (
        observation == "tokens"
        and tokenizer is not None
        and render is None
        and not has_chat_template(tokenizer)
    ):
        raise ValueError(
            "observation='tokens': the tokenizer has no chat template, so the prompt format of its model "
            "is unknown; pass a tokenizer that has one (Hugging Face: load it with chat_template=... or "
            "set tokenizer.chat_template), or choose a format explicitly with render='chatml' or "
            "render=<function LLMRequest -> str>"
        )
    return render


def make_codec(
    observation: ObservationMode = "object",
    action: ActionMode = "object",
    tokenizer: Tokenizer | None = None,
    *,
    render: PromptRender | str | None = None,
) -> Codec:
    """The codec for a pair of renderings; bad modes or a missing tokenizer fail here, not mid-episode.

    ``render`` (a function ``LLMRequest -> str``, or ``"chatml"``) replaces the tokenizer's chat
    template for ``observation="tokens"``: its text is ``tokenizer.encode``d.
    """
    if observation not in OBSERVATION_MODES:
        raise ValueError(f"observation must be one of {OBSERVATION_MODES}, got {observation!r}")
    if action not in ACTION_MODES:
        raise ValueError(f"action must be one of {ACTION_MODES}, got {action!r}")
    if tokenizer is not None and not isinstance(tokenizer, Tokenizer):
        raise TypeError(
            f"tokenizer must have encode(str) -> list[int] and decode(list[int]) -> str, got {tokenizer!r}"
        )
    if action == "tokens" and tokenizer is None:
        raise ValueError(
            "action='tokens' needs tokenizer=... to decode the generated ids into the reply text"
        )
    prompt_render = _prompt_render(observation, tokenizer, render)
    vocab = vocab_size_of(tokenizer)
    observation_spaces: dict[str, Callable[[], Space[Any]]] = {
        "object": LLMRequestSpace,
        "messages": ChatMessagesSpace,
        "tokens": lambda: token_ids_space(vocab),
    }
    action_spaces: dict[str, Callable[[], Space[Any]]] = {
        "object": LLMResponseSpace,
        "text": TextSpace,
        "tokens": lambda: token_ids_space(vocab),
    }
    return Codec(
        observation,
        action,
        tokenizer,
        observation_spaces[observation](),
        action_spaces[action](),
        prompt_render,
    )
