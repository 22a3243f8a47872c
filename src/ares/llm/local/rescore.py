"""The logprob of a sampled token llama.cpp did not report (an inner token of a multi-byte character).

One extra step per such token: the context up to it is fed, a plain ASCII token is forced as the
step's pick, and the step's top logprobs list the token. Those are llama.cpp's log-softmax of the
raw logits, which neither the forcing bias nor the temperature touch, so the value is the one the
sampler drew from. Forced rather than left to the greedy pick because a pick that is itself part of
a character gets no logprob entry at all.

The top 64 are asked for first (7 KB of JSON). A token sampled at temperature 1 is often far down
the list (19 of 60 short unicode answers failed the earlier re-score, which gave up after the top
4,096 of SmolLM2's 49,152), so the second ask covers the whole vocabulary (4.7 MB of JSON for
SmolLM2, about 0.4 s): every sampled token's logprob comes back, none is given up on.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any

from ares.errors import MalformedResponseError
from ares.llm.local.model import LocalModel

#: The first, cheap width; the second is the model's whole vocabulary.
FIRST_WIDTH = 64
#: Two plain one-byte texts: the forced pick is whichever of their tokens is not the one scored.
_PLAIN = ("a", "b")
#: Added to the forced token's logit: a greedy pick then takes it whatever the model prefers.
_FORCE = 1.0e9
_plain_ids: weakref.WeakKeyDictionary[LocalModel, list[int]] = weakref.WeakKeyDictionary()


async def rescore(model: LocalModel, context: list[int], token: int) -> float:
    """log p(``token`` | ``context``) under the model's raw distribution."""
    forced = await _forced_pick(model, token)
    for width in (FIRST_WIDTH, await model.vocab_size()):
        top = await top_logprobs(model, context, width, forced)
        if token in top:
            return top[token]
    raise MalformedResponseError(
        f"llama.cpp reported no logprob for token {token} in its whole vocabulary: not one of its ids?"
    )


async def top_logprobs(model: LocalModel, context: list[int], width: int, forced: int) -> dict[int, float]:
    """The ``width`` most likely next tokens after ``context`` and their raw logprobs (one forced step)."""
    body: Mapping[str, Any] = {
        "n_predict": 1, "n_probs": width, "temperature": 0.0, "cache_prompt": True,
        "return_tokens": True, "logit_bias": [[forced, _FORCE]],
    }  # fmt: skip
    data = await model.complete(context, body)
    try:
        entries = data["completion_probabilities"]
        return {int(c["id"]): float(c["logprob"]) for c in entries[0]["top_logprobs"]}
    except (KeyError, IndexError, TypeError, ValueError) as e:
        raise MalformedResponseError(
            f"llama.cpp gave no logprobs for a forced plain token ({forced}): missing or bad {e}"
        ) from None


async def _forced_pick(model: LocalModel, token: int) -> int:
    plain = _plain_ids.get(model)
    if plain is None:
        tokenized = [await model.tokenize(text, add_special=False) for text in _PLAIN]
        plain = _plain_ids[model] = [ids[0] for ids in tokenized if len(ids) == 1]
    for candidate in plain:
        if candidate != token:
            return candidate
    raise MalformedResponseError(f"the model has no one-token text among {_PLAIN} to force a step with")
