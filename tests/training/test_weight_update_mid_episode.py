"""A weight update in the middle of an episode, with the trainer's own model in process: the
episode lives through it (``PolicyGate``), its token sequence says which version sampled which
tokens, and each segment's recorded logprobs are what that version's weights give (recomputed).

The real SmolLM2-135M weights on this CPU, through the bash agent on a HumanEval task, prompts
token exact (``HFTokenizerRenderer``): three turns, the first from version 0, the rest from
version 1 after a perturbation of every weight while the gate was paused.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

import ares
from ares.records.collectors import MemoryCollector
from ares.rollout.pause import PolicyGate
from ares.rollout.runner import run_episodes
from ares.training import token_sequences

torch = pytest.importorskip("torch", reason="needs the train extra (torch)")
pytest.importorskip("transformers", reason="needs the train extra (transformers)")

TOLERANCE = 1e-3


@pytest.mark.timeout(600)
def test_each_version_segment_is_exact_for_the_weights_that_sampled_it() -> None:
    from ares.llm.local.default_model import default_model_path
    from ares.llm.tokens import HFTokenizerRenderer
    from ares.policies.transformers_policy import GenerationSettings, TransformersPolicy
    from ares.training.gguf import load_gguf_as_float
    from ares.training.scoring import completion_logprobs

    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # other CI lanes share the cores
    model, tokenizer = load_gguf_as_float(default_model_path())
    policy = TransformersPolicy(
        model, tokenizer, GenerationSettings(max_new_tokens=24, temperature=1.0, batch_size=1, gather_s=0.0)
    )
    gate = PolicyGate()
    versions: dict[int, Any] = {0: copy.deepcopy(model).eval()}
    first_answer = asyncio.Event()

    def factory(task: Any, action_format: Any) -> Any:
        inner = policy(task, action_format)

        class Watched:
            async def act(self, observation: Any) -> Any:
                answer = await inner.act(observation)
                first_answer.set()
                return answer

        return Watched()

    async def main() -> list[Any]:
        renderer = HFTokenizerRenderer(tokenizer)
        collector = MemoryCollector()

        def make_env() -> Any:
            return ares.make("humaneval", tasks="0:1", step_limit=3, token_renderer=renderer)

        run = asyncio.create_task(
            run_episodes(make_env, factory, episodes=1, concurrency=1, collector=collector, gate=gate)
        )
        await first_answer.wait()
        await gate.pause()  # no generation in flight: the weights may change
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.add_(torch.randn_like(parameter) * 0.02)
        policy.version = 1
        versions[1] = model
        gate.resume()
        results = await run
        assert [r.status.value for r in results] == ["finished"]
        return collector.take()

    try:
        (episode,) = asyncio.run(main())
        sequences = token_sequences(episode)
        seen: set[int | None] = set()
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        for sequence in sequences:
            assert sequence.logprobs is not None
            for start, end, version in sequence.version_segments:
                assert version in versions
                seen.add(version)
                with torch.no_grad():
                    rescored, _ = completion_logprobs(versions[version], [sequence], pad)
                recorded = torch.tensor(sequence.logprobs[start:end])
                mask = torch.tensor(sequence.mask[start:end], dtype=torch.bool)
                diff = (rescored[0, start:end] - recorded)[mask].abs().max().item()
                assert diff < TOLERANCE, f"version {version} tokens [{start}, {end}): {diff:.2e}"
                if version == 0 and 1 in versions:  # the new weights would not have given them
                    with torch.no_grad():
                        other, _ = completion_logprobs(versions[1], [sequence], pad)
                    assert (other[0, start:end] - recorded)[mask].abs().max().item() > TOLERANCE
        assert seen == {0, 1}  # both versions sampled tokens of this one episode
        turns = [c.policy_version for s in sequences for c in s.turn_calls]
        assert turns[0] == 0 and set(turns[1:]) == {1}
    finally:
        torch.set_num_threads(threads)
