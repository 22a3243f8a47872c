"""TRL's ``GRPOTrainer`` sampling through ARES environments (``rollout_func``; TRL >= 1.x).

TRL hands ``rollout_func(prompts, trainer)`` the batch's prompts (each repeated once per
generation) and wants, per prompt, the ids the model was fed, the completion ids and their
logprobs. Here each prompt names an ARES task; the rollout runs one episode per prompt with the
trainer's own model (``TransformersPolicy``: on-policy, batched ``generate``) and returns each
episode's ``TokenSequence``: a multi-turn episode is one completion whose environment tokens are
masked out through TRL's ``env_mask``. The verifier's reward comes back in the ``ares_reward``
column for ``ares_reward_func``; an episode without a reward (errored) gets None, which TRL leaves
out of its group's baseline, and an all-zero mask, so none of its tokens are trained on.

    trainer = GRPOTrainer(
        model=model, processing_class=tokenizer, train_dataset=Dataset.from_dict({"prompt": ids}),
        reward_funcs=ares_reward_func, args=GRPOConfig(num_generations=4, ...),
        rollout_func=ares_rollout_func(lambda tasks: ares.make("humaneval-single", tasks=tasks)),
    )

TRL itself is not imported here: anything with ``GRPOTrainer``'s ``model``, ``processing_class``
and ``state.global_step`` will do.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from ares.core.environment import Environment
from ares.policies.base import PolicyFactory
from ares.training.rollouts import collect_rollouts
from ares.training.sequences import TokenSequence

#: The extra column ``rollout_func`` returns and ``ares_reward_func`` reads.
REWARD_COLUMN = "ares_reward"
#: Extra columns for an asynchronous trainer (TRL passes them on to reward functions): the version
#: that sampled each completion token (None for environment tokens), the oldest version of the
#: sample, and each turn's ``TurnCall`` (versions asked and answering, times, queue time).
VERSIONS_COLUMN = "ares_token_versions"
OLDEST_COLUMN = "ares_oldest_version"
CALLS_COLUMN = "ares_turn_calls"
RolloutFunc = Callable[[list[Any], Any], dict[str, list[Any]]]


def ares_rollout_func(
    make_env: Callable[[list[str]], Environment[Any, Any]],
    policy: Callable[[Any], PolicyFactory] | None = None,
    *,
    concurrency: int | None = None,
    seed: int = 0,
    **run_options: Any,
) -> RolloutFunc:
    """A TRL ``rollout_func``: ``make_env(task_ids)`` builds an environment over exactly those tasks
    (one per prompt, duplicates kept); ``policy(trainer)`` the policy (default: the trainer's model).

    Each prompt is a task id (a string, or a dict with ``"task_id"``).
    """

    def rollout(prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        task_ids = [_task_id(p) for p in prompts]
        factory = (policy or trainer_policy)(trainer)
        step = int(getattr(getattr(trainer, "state", None), "global_step", 0) or 0)
        run = collect_rollouts(
            lambda: make_env(task_ids), factory, episodes=len(task_ids), num_tasks=len(task_ids),
            concurrency=concurrency or len(task_ids), seed=seed + step * len(task_ids), **run_options,
        )  # fmt: skip
        batch = asyncio.run(run)
        eos = _eos_id(trainer)
        return trl_columns([per[-1] if per else None for per in batch.sequences], eos)

    return rollout


def trl_columns(sequences: Sequence[TokenSequence | None], eos_id: int) -> dict[str, list[Any]]:
    """The dict TRL wants from a ``rollout_func``, one entry per sample (None: an episode that
    produced no tokens, padded to a single masked EOS so TRL's batch keeps its shape)."""
    out: dict[str, list[Any]] = {
        "prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": [], REWARD_COLUMN: [],
        VERSIONS_COLUMN: [], OLDEST_COLUMN: [], CALLS_COLUMN: [],
    }  # fmt: skip
    for s in sequences:
        if s is None or not s.completion_ids:
            out["prompt_ids"].append(list(s.prompt_ids) if s is not None and s.prompt_ids else [eos_id])
            out["completion_ids"].append([eos_id])
            out["logprobs"].append([0.0])
            out["env_mask"].append([0])
            out[REWARD_COLUMN].append(None)
            out[VERSIONS_COLUMN].append([None])
            out[OLDEST_COLUMN].append(None)
            out[CALLS_COLUMN].append([])
            continue
        scored = s.trainable
        out["prompt_ids"].append(list(s.prompt_ids))
        out["completion_ids"].append(list(s.completion_ids))
        out["logprobs"].append(list(s.logprobs) if s.logprobs is not None else [0.0] * len(s.completion_ids))
        out["env_mask"].append(list(s.mask) if scored else [0] * len(s.mask))
        out[REWARD_COLUMN].append(s.reward if scored else None)  # a masked sample scores nothing
        out[VERSIONS_COLUMN].append(list(s.token_versions()))
        out[OLDEST_COLUMN].append(s.oldest_version)
        out[CALLS_COLUMN].append([dataclasses.asdict(call) for call in s.turn_calls])
    return out


def ares_reward_func(completions: list[Any], **columns: Any) -> list[float | None]:
    """A TRL reward function: the ARES verifier's reward of each sample (None when it has none)."""
    rewards = columns.get(REWARD_COLUMN)
    if rewards is None or len(rewards) != len(completions):
        raise ValueError(f"no {REWARD_COLUMN!r} column: use ares_rollout_func as the trainer's rollout_func")
    return [None if r is None else float(r) for r in rewards]


def trainer_policy(trainer: Any) -> PolicyFactory:
    """The trainer's own model and tokenizer as an on-policy ARES policy (extra ``train``), its
    version the trainer's ``state.global_step`` (the optimizer steps taken so far)."""
    from ares.policies.transformers_policy import GenerationSettings, TransformersPolicy

    args = getattr(trainer, "args", None)
    accelerator = getattr(trainer, "accelerator", None)
    model = accelerator.unwrap_model(trainer.model) if accelerator is not None else trainer.model
    temperature = getattr(args, "temperature", None)
    settings = GenerationSettings(
        max_new_tokens=int(getattr(args, "max_completion_length", None) or 256),
        temperature=1.0 if temperature is None else float(temperature),
        batch_size=int(getattr(args, "per_device_train_batch_size", None) or 8)
        * int(getattr(args, "steps_per_generation", None) or 1),
    )
    step = int(getattr(getattr(trainer, "state", None), "global_step", 0) or 0)
    return TransformersPolicy(model, trainer.processing_class, settings, version=step)


def _task_id(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, dict) and isinstance(prompt.get("task_id"), str):
        return prompt["task_id"]
    raise ValueError(f"each prompt must be an ARES task id (or a dict with 'task_id'), got {prompt!r:.80}")


def _eos_id(trainer: Any) -> int:
    tokenizer = trainer.processing_class
    eos = getattr(tokenizer, "eos_token_id", None)
    if eos is None:
        raise ValueError("the trainer's tokenizer has no eos_token_id")
    return int(eos)
