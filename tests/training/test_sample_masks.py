"""A masked sample (an infra or task fault, ``ares.envs.blame``) adds no gradient in any trainer
shape, and is left out of its group's statistics; a policy's own zero is kept."""

from __future__ import annotations

from ares.training.formats import skyrl_generator_output
from ares.training.rollouts import group_advantages
from ares.training.sequences import TokenSequence
from ares.training.trl import trl_columns


def _sequence(reward: float | None, blame: str | None, masked: bool, group: str = "g") -> TokenSequence:
    return TokenSequence(
        episode_id=f"e{reward}{blame}", task_id="t", index=0, group_id=group,
        status="finished" if reward is not None else "errored", reward=reward,
        prompt_ids=(1, 2), completion_ids=(3, 4), mask=(1, 1), logprobs=(-0.1, -0.2), turns=1,
        outcome=None if reward is None else reward >= 1.0, blame=blame, masked=masked,
    )  # fmt: skip


def test_a_masked_sample_adds_nothing_and_a_policy_zero_is_kept() -> None:
    solved = _sequence(1.0, None, False)
    own_zero = _sequence(0.0, "policy", False)  # e.g. it crashed its own sandbox: trained on
    infra = _sequence(0.0, "infra", True)  # a reward, yet masked: never trained on
    errored = _sequence(None, "task", True)
    batch = [solved, own_zero, infra, errored]
    assert [s.trainable for s in batch] == [True, True, False, False]
    skyrl = skyrl_generator_output(batch)
    assert skyrl["loss_masks"] == [[1, 1], [1, 1], [0, 0], [0, 0]]
    assert skyrl["rewards"] == [1.0, 0.0, 0.0, 0.0]
    advantages = group_advantages(batch, scale=False)
    assert advantages == [0.5, -0.5, 0.0, 0.0]  # the group is the two unmasked members
    trl = trl_columns(batch, eos_id=0)
    assert trl["env_mask"] == [[1, 1], [1, 1], [0, 0], [0, 0]]
    assert trl["ares_reward"] == [1.0, 0.0, None, None]
