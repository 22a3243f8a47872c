"""``TokenSequence``s in the shapes other trainers take, as plain lists (no trainer is imported).

- SkyRL: a generator's ``GeneratorOutput`` (``skyrl_generator_output``).
- verl: the fields of an agent loop's ``AgentLoopOutput`` (``verl_agent_loop_output``).
- Tinker: the ``model_input`` tokens and ``loss_fn_inputs`` of a ``tinker.Datum`` for the
  ``importance_sampling`` / ``ppo`` losses (``tinker_datum``).

All three train on one concatenated sequence per episode with the environment's tokens masked out,
which is what ``token_sequences`` builds; see docs/policies-and-trainers.md for where each goes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ares.training.sequences import TokenSequence


def skyrl_generator_output(sequences: Sequence[TokenSequence]) -> dict[str, Any]:
    """SkyRL ``GeneratorOutput``: one entry per sequence, one reward per sequence.

    A sequence that is not ``trainable`` (no reward, or masked for an infra or task fault) gets
    reward 0.0 and an all-zero loss mask, so it adds no gradient; drop such sequences first if the
    group may shrink.
    """
    return {
        "prompt_token_ids": [list(s.prompt_ids) for s in sequences],
        "response_ids": [list(s.completion_ids) for s in sequences],
        "rewards": [float(s.reward) if s.trainable and s.reward is not None else 0.0 for s in sequences],
        "loss_masks": [list(s.mask) if s.trainable else [0] * len(s.mask) for s in sequences],
        "rollout_logprobs": (
            None
            if any(s.logprobs is None for s in sequences)
            else [list(s.logprobs or ()) for s in sequences]
        ),
        "stop_reasons": [s.status for s in sequences],  # the episode's status: finished, truncated, ...
        "rollout_metrics": {},
    }


def verl_agent_loop_output(sequence: TokenSequence) -> dict[str, Any]:
    """The fields of verl's ``AgentLoopOutput`` (pass them as keyword arguments)."""
    return {
        "prompt_ids": list(sequence.prompt_ids),
        "response_ids": list(sequence.completion_ids),
        "response_mask": list(sequence.mask),
        "response_logprobs": None if sequence.logprobs is None else list(sequence.logprobs),
        "reward_score": sequence.reward,
        "num_turns": 2 * sequence.turns,  # verl counts user and assistant turns
    }


def tinker_datum(sequence: TokenSequence, advantage: float) -> dict[str, Any]:
    """``model_input`` tokens and per-token ``loss_fn_inputs`` of a ``tinker.Datum``.

    Tinker scores ``target_tokens[i]`` (= token i+1) from ``model_input[:i+1]``: targets are the
    sequence shifted left by one; prompt and environment positions get logprob 0 and advantage 0.

        tinker.Datum(model_input=tinker.ModelInput.from_ints(d["model_input"]),
                     loss_fn_inputs=d["loss_fn_inputs"])
    """
    logprobs = sequence.logprobs
    if logprobs is None:
        raise ValueError(
            f"sequence of episode {sequence.episode_id} has no logprobs: Tinker's losses need them"
        )
    tokens = [*sequence.prompt_ids, *sequence.completion_ids]
    before = len(sequence.prompt_ids) - 1  # targets that are still prompt tokens
    sampled = list(zip(logprobs, sequence.mask, strict=True))
    return {
        "model_input": tokens[:-1],
        "loss_fn_inputs": {
            "target_tokens": tokens[1:],
            "logprobs": [0.0] * before + [lp if m else 0.0 for lp, m in sampled],
            "advantages": [0.0] * before + [advantage if m else 0.0 for m in sequence.mask],
        },
        # Beside the datum (Tinker takes only the two above): which version sampled each target
        # (None for prompt and environment tokens), and each turn's call, for a staleness bound.
        "target_versions": [None] * before + list(sequence.token_versions()),
        "turn_calls": [dataclasses.asdict(call) for call in sequence.turn_calls],
    }
