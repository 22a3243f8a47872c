"""Training on ARES rollouts: exact token sequences, GRPO groups, and adapters for trainers.

- ``sequences``: an episode as ``TokenSequence``s (prompt ids, completion ids, a mask of the tokens
  the policy sampled, their logprobs, the episode's reward and status).
- ``rollouts``: ``collect_rollouts`` runs a batch of grouped episodes and returns both;
  ``collect_informative`` keeps only the groups whose outcomes disagree (dynamic sampling);
  ``group_advantages`` computes GRPO's group-relative advantages.
- ``trl``: TRL ``GRPOTrainer``'s ``rollout_func`` and reward function (TRL is imported lazily).
- ``tinker``: sampling through a ``tinker.SamplingClient`` and ``tinker.Datum``s to train on.
- ``formats``: the SkyRL ``GeneratorOutput`` and verl ``AgentLoopOutput`` shapes, as plain lists.
- ``scoring``, ``gguf`` (extra ``train``): a transformers model's logprobs of the sequences, and a
  GGUF loaded as a trainable float model.
"""

from ares.training.rollouts import Rollouts, collect_informative, collect_rollouts, group_advantages
from ares.training.sequences import (
    SCORED,
    MissingTokensError,
    PrefixError,
    TokenSequence,
    episode_sequences,
    token_sequences,
)

__all__ = [
    "SCORED",
    "MissingTokensError",
    "PrefixError",
    "Rollouts",
    "TokenSequence",
    "collect_informative",
    "collect_rollouts",
    "episode_sequences",
    "group_advantages",
    "token_sequences",
]
