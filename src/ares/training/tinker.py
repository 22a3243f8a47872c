"""Tinker as the policy and the trainer: sample through a ``tinker.SamplingClient``, train on
``tinker.Datum``s built from ARES's exact token sequences (``pip install tinker``).

Sampling works in tokens, so the environment must make every observation token exact: build it
with ``token_renderer=HFTokenizerRenderer(tokenizer)`` for the model Tinker serves. Each answer
carries Tinker's sampled tokens and logprobs, which ``tinker_datums`` turns into the per-token
``target_tokens`` / ``logprobs`` / ``advantages`` of the ``importance_sampling`` and ``ppo`` losses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ares.agents.base import ActionFormat
from ares.errors import LLMError
from ares.llm._wire import PROMPT_TOKEN_IDS_KEY
from ares.llm.types import LLMRequest, LLMResponse, Usage
from ares.policies.base import Policy
from ares.tasks.model import Task
from ares.training.formats import tinker_datum
from ares.training.rollouts import group_advantages
from ares.training.sequences import TokenSequence


@dataclass(frozen=True, slots=True)
class TinkerPolicy:
    """Answers token-exact observations with one sample from ``sampling_client`` (a PolicyFactory too:
    every episode shares it). ``stop``: token ids that end an answer (default: the tokenizer's EOS)."""

    sampling_client: Any  # tinker.SamplingClient
    tokenizer: Any  # the served model's tokenizer: decodes the answer for the agent
    max_tokens: int = 512
    temperature: float = 1.0
    stop: tuple[int, ...] | None = None

    def __call__(self, task: Task, action_format: ActionFormat) -> Policy:
        return self

    async def act(self, observation: LLMRequest) -> LLMResponse:
        import tinker

        ids = observation.prompt_token_ids
        if not ids:
            raise LLMError(
                "TinkerPolicy samples from token ids: build the environment with "
                "token_renderer=HFTokenizerRenderer(tokenizer)"
            )
        stop = list(self.stop) if self.stop is not None else [int(self.tokenizer.eos_token_id)]
        params = tinker.SamplingParams(max_tokens=self.max_tokens, temperature=self.temperature, stop=stop)
        answer = await self.sampling_client.sample(
            prompt=tinker.ModelInput.from_ints(list(ids)), num_samples=1, sampling_params=params
        )
        sampled = answer.sequences[0]
        tokens, logprobs = list(sampled.tokens), sampled.logprobs
        return LLMResponse(
            content=self.tokenizer.decode(tokens, skip_special_tokens=True),
            finish_reason="length" if sampled.stop_reason == "length" else "stop",
            usage=Usage(prompt_tokens=len(ids), completion_tokens=len(tokens)),
            token_ids=tuple(tokens),
            logprobs=None if logprobs is None else tuple(float(x) for x in logprobs),
            extra={PROMPT_TOKEN_IDS_KEY: list(ids)},
        )


def tinker_datums(sequences: Sequence[TokenSequence], advantages: Sequence[float] | None = None) -> list[Any]:
    """``tinker.Datum``s for ``TrainingClient.forward_backward(..., loss_fn="importance_sampling")``.

    ``advantages`` default to GRPO's group-relative ones; sequences that are not ``trainable`` (no
    reward, or masked) are left out.
    """
    import tinker

    scored = [s for s in sequences if s.trainable]
    if advantages is None:
        advantages = group_advantages(scored)
    elif len(advantages) != len(scored):
        raise ValueError(f"{len(advantages)} advantages for {len(scored)} scored sequences")
    datums = []
    for s, advantage in zip(scored, advantages, strict=True):
        d = tinker_datum(s, advantage)
        model_input = tinker.ModelInput.from_ints(d["model_input"])
        datums.append(tinker.Datum(model_input=model_input, loss_fn_inputs=d["loss_fn_inputs"]))
    return datums
