"""TransformersPolicy as a ResumablePolicy: preempted mid-generation it stops at the next token and
keeps what it sampled; re-issued after a weight update it continues from prompt + those tokens, and
the answer's tokens and logprobs are exactly each version's (checked against the models themselves).
A real (tiny, randomly initialised) Llama and a real byte-level tokenizer."""

from __future__ import annotations

import asyncio
import copy
from dataclasses import replace
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="TransformersPolicy needs the train extra (torch)")
transformers = pytest.importorskip("transformers")

from ares.llm.token_versions import VERSION_SEGMENTS_KEY  # noqa: E402
from ares.llm.types import LLMRequest, user  # noqa: E402
from ares.policies.resuming import KeptTokens, ResumablePolicy, TokenChunk  # noqa: E402
from ares.policies.transformers_policy import GenerationSettings, TransformersPolicy  # noqa: E402
from ares.rollout.pause import PolicyGate  # noqa: E402
from ares.rollout.preemption import answer  # noqa: E402

PROMPT = tuple(b"def add(a, b):\n")
#: More than the test lets it sample before it preempts: the first attempt never ends by itself.
BUDGET = 2000


def tiny_policy() -> TransformersPolicy:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {symbol: i for i, symbol in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    raw = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=raw, eos_token="<|im_end|>")
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, eos_token_id=tokenizer.eos_token_id,
    )  # fmt: skip
    model = LlamaForCausalLM(config).eval()
    model.generation_config.suppress_tokens = [tokenizer.eos_token_id]  # it never stops by itself
    settings = GenerationSettings(max_new_tokens=BUDGET, temperature=1.0, batch_size=2, gather_s=0.0)
    return TransformersPolicy(model, tokenizer, settings)


def logprobs_of(model: Any, prompt: tuple[int, ...], completion: tuple[int, ...]) -> list[float]:
    """Each completion token's logprob under ``model``, teacher-forced after ``prompt``."""
    ids = torch.tensor([list(prompt + completion)])
    with torch.inference_mode():
        logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
    chosen = torch.log_softmax(logits, dim=-1).gather(-1, torch.tensor(completion).unsqueeze(-1))
    return chosen.squeeze(-1).tolist()


async def wait_until_sampling(policy: TransformersPolicy, tokens: int, answers: int = 1) -> None:
    """Until ``answers`` answers have sampled ``tokens`` tokens each (counted in the generating
    thread, which has no event to wait on)."""
    while len(policy.in_progress()) < answers or min(policy.in_progress()) < tokens:  # noqa: ASYNC110
        await asyncio.sleep(0.01)


async def test_a_preempted_generation_keeps_its_tokens_and_continues_with_the_new_weights() -> None:
    policy, gate = tiny_policy(), PolicyGate()
    assert isinstance(policy, ResumablePolicy)
    eos = policy.tokenizer.eos_token_id
    observation = LLMRequest(messages=(user("add"),), prompt_token_ids=PROMPT)

    async def ask() -> Any:
        async with gate.call():
            return await answer(policy, observation, None, gate)

    call = asyncio.create_task(ask())
    await wait_until_sampling(policy, 3)
    await gate.pause(preempt=True)  # generation stopped at its next token; its tokens were kept
    assert policy.in_progress() == [] and gate.preemptions == 1 and not call.done()
    old = copy.deepcopy(policy.model)
    with torch.no_grad():  # the "weight update"
        policy.model.lm_head.weight.mul_(1.5)
    policy.version = 1
    # The new weights may only end the answer: the continuation is one token, and deterministic.
    policy.model.generation_config.suppress_tokens = [t for t in range(len(policy.tokenizer)) if t != eos]
    gate.resume()
    response = await call
    ids, logprobs = response.token_ids, response.logprobs
    kept = len(ids) - 1
    assert 3 <= kept < BUDGET and ids[-1] == eos and response.finish_reason == "stop"
    assert response.extra[VERSION_SEGMENTS_KEY] == [[0, kept, 0], [kept, kept + 1, 1]]
    assert response.policy_version == 1 and response.usage.completion_tokens == kept + 1
    # Exactly what each version sampled: the kept tokens' logprobs are the old weights', the rest the new.
    assert logprobs[:kept] == pytest.approx(logprobs_of(old, PROMPT, ids[:kept]), abs=1e-4)
    assert logprobs[kept:] == pytest.approx(logprobs_of(policy.model, PROMPT, ids)[kept:], abs=1e-4)
    assert logprobs[kept:] != pytest.approx(logprobs_of(old, PROMPT, ids)[kept:], abs=1e-4)


async def test_a_cancelled_answer_stops_only_its_own_row_of_the_batch() -> None:
    policy = tiny_policy()
    policy.settings = replace(policy.settings, max_new_tokens=200)
    first = LLMRequest(messages=(user("one"),), prompt_token_ids=PROMPT)
    second = LLMRequest(messages=(user("two"),), prompt_token_ids=PROMPT[:-1])
    kept: list[TokenChunk] = []
    cancelled = asyncio.create_task(policy.act_resuming(first, KeptTokens(), kept.append))
    other = asyncio.create_task(policy.act(second))
    await wait_until_sampling(policy, 2, answers=2)  # one batch of two
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    (chunk,) = kept
    assert 2 <= len(chunk.token_ids) < 200 and chunk.version == 0  # stopped at its next token
    assert len((await other).token_ids) == 200  # the other row ran to its budget
