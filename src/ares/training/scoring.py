"""Score token sequences with a ``transformers`` model: the trainer's side of the logprob check.

``completion_logprobs`` is the forward pass a policy-gradient loss needs (and what re-scores a
sampler's recorded logprobs): log p(token | everything before it) for each completion token of a
batch of ``TokenSequence``s, computed only where completions are (extra ``train``: torch).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ares.training.sequences import TokenSequence


def completion_logprobs(
    model: Any, sequences: Sequence[TokenSequence], pad_id: int, temperature: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """log p(token | everything before it) for every completion token: ([B, C], mask [B, C]).

    ``temperature`` scores under logits / temperature, the distribution a sampler at that
    temperature drew from (``TransformersPolicy`` records exactly these).

    Prompts are left-padded so all completions start at one column (only their C logits are
    computed: ``logits_to_keep``), with explicit position ids so padding shifts nothing, exactly
    as the sampler's left-padded ``generate`` saw them.
    """
    width_p = max(len(s.prompt_ids) for s in sequences)
    width_c = max(len(s.completion_ids) for s in sequences)
    rows, attention, keep = [], [], []
    for s in sequences:
        left, right = width_p - len(s.prompt_ids), width_c - len(s.completion_ids)
        rows.append([pad_id] * left + [*s.prompt_ids, *s.completion_ids] + [pad_id] * right)
        attention.append([0] * left + [1] * (len(s.prompt_ids) + len(s.completion_ids)) + [0] * right)
        keep.append([*s.mask, *[0] * right])
    ids, mask = torch.tensor(rows), torch.tensor(attention)
    positions = (mask.cumsum(-1) - 1).clamp_min(0)
    logits = model(input_ids=ids, attention_mask=mask, position_ids=positions, logits_to_keep=width_c + 1)
    logits = logits.logits[:, :-1].float() / temperature  # the logits predicting each completion token
    chosen = torch.log_softmax(logits, dim=-1).gather(-1, ids[:, width_p:, None]).squeeze(-1)
    return chosen, torch.tensor(keep, dtype=chosen.dtype)
