"""The SkyRL, verl and Tinker shapes of a token sequence: lengths line up, masks and shifts are right."""

from __future__ import annotations

import pytest

from ares.training import TokenSequence
from ares.training.formats import skyrl_generator_output, tinker_datum, verl_agent_loop_output

#: prompt 1 2 3; the policy says 5 6, the environment adds 9, the policy says 7.
MULTI_TURN = TokenSequence(
    "e", "t", 0, "g0", "finished", 1.0, (1, 2, 3), (5, 6, 9, 7), (1, 1, 0, 1), (-0.5, -1.0, 0.0, -2.0), 2
)
ERRORED = TokenSequence("f", "t", 1, "g0", "errored", None, (1,), (5,), (1,), None, 1)


def test_skyrl_generator_output_masks_out_unscored_episodes() -> None:
    out = skyrl_generator_output([MULTI_TURN, ERRORED])
    assert out["prompt_token_ids"] == [[1, 2, 3], [1]]
    assert out["response_ids"] == [[5, 6, 9, 7], [5]]
    assert out["loss_masks"] == [[1, 1, 0, 1], [0]]
    assert out["rewards"] == [1.0, 0.0]
    assert out["rollout_logprobs"] is None  # one sequence has none, so the batch has none
    assert skyrl_generator_output([MULTI_TURN])["rollout_logprobs"] == [[-0.5, -1.0, 0.0, -2.0]]
    assert out["stop_reasons"] == ["finished", "errored"]


def test_verl_agent_loop_output_fields() -> None:
    out = verl_agent_loop_output(MULTI_TURN)
    assert out == {
        "prompt_ids": [1, 2, 3],
        "response_ids": [5, 6, 9, 7],
        "response_mask": [1, 1, 0, 1],
        "response_logprobs": [-0.5, -1.0, 0.0, -2.0],
        "reward_score": 1.0,
        "num_turns": 4,
    }


def test_tinker_datum_is_shifted_by_one_with_only_sampled_tokens_weighted() -> None:
    d = tinker_datum(MULTI_TURN, advantage=0.5)
    assert d["model_input"] == [1, 2, 3, 5, 6, 9]
    inputs = d["loss_fn_inputs"]
    assert inputs["target_tokens"] == [2, 3, 5, 6, 9, 7]
    assert inputs["logprobs"] == [0.0, 0.0, -0.5, -1.0, 0.0, -2.0]
    assert inputs["advantages"] == [0.0, 0.0, 0.5, 0.5, 0.0, 0.5]
    assert all(len(v) == len(d["model_input"]) for v in inputs.values())


def test_tinker_needs_logprobs() -> None:
    with pytest.raises(ValueError, match="no logprobs"):
        tinker_datum(ERRORED, advantage=1.0)
