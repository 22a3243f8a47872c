"""TRL's GRPOTrainer trains SmolLM2 on rewards from real ARES episodes, offline, through rollout_func."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import ares
from ares.llm.local.default_model import MODEL_INSTALL_COMMAND, installed_default_model
from ares.training.trl import (
    CALLS_COLUMN,
    OLDEST_COLUMN,
    REWARD_COLUMN,
    VERSIONS_COLUMN,
    ares_reward_func,
    ares_rollout_func,
    trl_columns,
)

pytest.importorskip("torch", reason="needs the train extra (torch)")
pytest.importorskip("trl", reason="needs TRL: pip install trl")
pytest.importorskip("gguf", reason="loading the GGUF into transformers needs gguf")
if installed_default_model() is None:
    pytest.skip(f"trains the packaged SmolLM2 model: {MODEL_INSTALL_COMMAND}", allow_module_level=True)


def test_reward_func_demands_the_ares_column() -> None:
    with pytest.raises(ValueError, match="ares_rollout_func"):
        ares_reward_func(["a"], other=[1.0])
    assert ares_reward_func(["a", "b"], **{REWARD_COLUMN: [1, None]}) == [1.0, None]


def test_an_episode_without_tokens_is_a_masked_placeholder() -> None:
    columns = trl_columns([None], eos_id=2)
    assert columns == {
        "prompt_ids": [[2]],
        "completion_ids": [[2]],
        "logprobs": [[0.0]],
        "env_mask": [[0]],
        REWARD_COLUMN: [None],
        VERSIONS_COLUMN: [[None]],
        OLDEST_COLUMN: [None],
        CALLS_COLUMN: [[]],
    }


@pytest.mark.timeout(300)
def test_grpo_trainer_steps_on_ares_rollouts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    # One intra-op thread: CI runs two lanes on two cores, and torch's spinning threads competing with
    # the other lane's processes made one training step take minutes.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        _train_and_check(tmp_path)
    finally:
        torch.set_num_threads(threads)


def _train_and_check(tmp_path: Path) -> None:
    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from ares.llm.local.default_model import default_model_path
    from ares.training.gguf import load_gguf_as_float

    model, tokenizer = load_gguf_as_float(default_model_path())
    task_ids = [t.id for t in ares.make("humaneval-single", tasks="0:2").tasks]
    calls: list[tuple[list[Any], dict[str, list[Any]]]] = []
    rollout = ares_rollout_func(lambda tasks: ares.make("humaneval-single", tasks=tasks))

    def recorded(prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        out = rollout(prompts, trainer)
        calls.append((list(prompts), out))
        return out

    before = [p.detach().clone() for p in model.parameters()]
    config = GRPOConfig(
        output_dir=str(tmp_path), use_cpu=True, report_to="none", save_strategy="no", logging_steps=1,
        per_device_train_batch_size=2, num_generations=2, max_completion_length=16, max_steps=2,
        learning_rate=1e-3, beta=0.0, seed=0,
        # Recomputing activations saves memory a 135M model does not need and doubles the backward pass.
        gradient_checkpointing=False,
    )  # fmt: skip
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        # The verifier's reward, plus a tie-breaker so a group always differs and a gradient flows.
        reward_funcs=[ares_reward_func, distinct_characters],
        train_dataset=Dataset.from_dict({"prompt": task_ids}),
        rollout_func=recorded,
        args=config,
    )
    trainer.train()
    assert trainer.state.global_step == 2
    assert len(calls) == 2
    for prompts, out in calls:
        assert len(prompts) == 2 and prompts[0] == prompts[1] and prompts[0] in task_ids  # one group
        assert all(len(out[k]) == 2 for k in ("prompt_ids", "completion_ids", "logprobs", "env_mask"))
        for ids, logprobs, mask in zip(out["completion_ids"], out["logprobs"], out["env_mask"], strict=True):
            assert 0 < len(ids) <= 16 and len(logprobs) == len(ids) == len(mask) and all(mask)
        assert all(r in (0.0, 1.0) for r in out[REWARD_COLUMN])
    # Each batch was sampled by the weights of the step it was taken at, and says so per token.
    for step, (_, out) in enumerate(calls):
        assert out[OLDEST_COLUMN] == [step, step]
        for ids, versions, turn_calls in zip(
            out["completion_ids"], out[VERSIONS_COLUMN], out[CALLS_COLUMN], strict=True
        ):
            assert versions == [step] * len(ids)
            assert [(c["policy_version"], c["requested_version"]) for c in turn_calls] == [(step, step)]
            assert turn_calls[0]["answered_at"] >= turn_calls[0]["requested_at"] + turn_calls[0]["queue_s"]
    logged = [h for h in trainer.state.log_history if "reward" in h]
    assert len(logged) == 2 and all(0.0 <= h["reward"] <= 1.0 for h in logged)
    # TRL's length accounting is ARES's: the completion lengths it logged are the episodes' tokens.
    for (_, out), h in zip(calls, logged, strict=True):
        lengths = [len(ids) for ids in out["completion_ids"]]
        assert h["completions/mean_length"] == pytest.approx(sum(lengths) / len(lengths))
        assert h["rewards/ares_reward_func/mean"] == pytest.approx(sum(out[REWARD_COLUMN]) / 2)
    # TRL's loss was computed on the completions the ARES policy sampled, and the weights moved.
    assert any(not torch.equal(a, b.detach()) for a, b in zip(before, model.parameters(), strict=True))


def distinct_characters(completions: list[Any], **_: Any) -> list[float]:
    return [len(set(str(c))) / 100 for c in completions]
