"""The GRPO example trains end to end in its short form: real model, real sandboxes, real verifier."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from ares.llm.local.default_model import MODEL_INSTALL_COMMAND, installed_default_model

pytest.importorskip("torch", reason="the GRPO example needs the train extra (torch)")
pytest.importorskip("gguf", reason="loading the GGUF into transformers needs gguf")
if installed_default_model() is None:
    pytest.skip(f"the example trains the default model: {MODEL_INSTALL_COMMAND}", allow_module_level=True)

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "train_grpo.py"
#: The sampler and the trainer run the same float32 weights: only kernel rounding separates them.
SAME_WEIGHTS_TOLERANCE = 1e-3
#: llama.cpp runs the Q4_1 weights with quantized activations; the trainer the dequantized floats.
QUANTIZED_TOLERANCE = 1.5


@pytest.mark.timeout(600)
def test_two_grpo_steps_log_finite_losses_and_on_policy_logprobs(tmp_path: Path) -> None:
    out = tmp_path / "grpo.jsonl"
    run = subprocess.run(
        [sys.executable, str(EXAMPLE), "--steps", "2", "--tasks", "0:2", "--k", "2",
         "--max-new-tokens", "24", "--train-layers", "2", "--out", str(out)],
        capture_output=True, text=True, timeout=590, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    entries = [json.loads(line) for line in out.read_text().splitlines()]
    setup, check, steps, total = entries[0], entries[1], entries[2:-1], entries[-1]
    assert total["total_wall_s"] > 0
    assert (setup["tasks"], setup["k"]) == (2, 2)
    assert check["check"] == "local" and check["tokens"] > 0
    assert 0 <= check["max_abs_diff"] < QUANTIZED_TOLERANCE
    assert [s["step"] for s in steps] == [0, 1]
    for s in steps:
        assert s["samples"] == 4
        assert 0.0 <= s["mean_reward"] <= 1.0
        assert math.isfinite(s["loss"]) and s["kl"] >= 0.0
        assert s["logprob_max_abs_diff"] < SAME_WEIGHTS_TOLERANCE
        assert s["policy_versions"] == [s["step"]]  # step t trains on tokens of the weights after t steps
        assert s["wall_s"] > 0


@pytest.mark.timeout(600)
def test_async_grpo_samples_ahead_with_staleness_at_most_one(tmp_path: Path) -> None:
    """--async: batch t+1 is sampled while batch t's gradients are computed; the optimizer steps
    only between generations, so each sample is of one version, at most one behind its trainer."""
    out = tmp_path / "grpo.jsonl"
    run = subprocess.run(
        [sys.executable, str(EXAMPLE), "--async", "--steps", "2", "--tasks", "0:1", "--k", "2",
         "--max-new-tokens", "16", "--train-layers", "1", "--skip-local-check", "--out", str(out)],
        capture_output=True, text=True, timeout=590, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    steps = [json.loads(line) for line in out.read_text().splitlines()][1:-1]
    assert [s["step"] for s in steps] == [0, 1]
    assert steps[0]["policy_versions"] == [0]  # the first batch: the starting weights
    for s in steps:
        assert s["samples"] == 2 and math.isfinite(s["loss"])
        assert set(s["policy_versions"]) <= {s["step"] - 1, s["step"]}  # staleness <= 1


@pytest.mark.timeout(600)
def test_a_curriculum_with_dynamic_sampling_trains_only_on_groups_with_signal(tmp_path: Path) -> None:
    """--sampler informative --dynamic-sampling 2: up to two groups a step are played until one has
    outcomes that differ; the dropped groups are counted and never trained on."""
    out = tmp_path / "grpo.jsonl"
    run = subprocess.run(
        [sys.executable, str(EXAMPLE), "--steps", "1", "--tasks", "0:3", "--k", "2", "--groups", "1",
         "--sampler", "informative", "--dynamic-sampling", "2", "--max-new-tokens", "8",
         "--train-layers", "1", "--skip-local-check", "--eval-k", "2", "--out", str(out)],
        capture_output=True, text=True, timeout=590, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    setup, step, evaluation, _ = (json.loads(line) for line in out.read_text().splitlines())
    assert (setup["groups"], setup["sampler"], setup["dynamic_sampling"]) == (1, "informative", 2)
    kept = step["groups_played"] - step["groups_without_signal"]
    assert 1 <= step["groups_played"] <= 2 and kept in (0, 1)
    assert step["samples"] == 2 * kept  # only a group whose outcomes differ is trained on
    # the trained weights, 2 samples of each of the 3 tasks
    assert (evaluation["eval_k"], evaluation["eval_samples"]) == (2, 6)
    assert 0.0 <= evaluation["eval_pass_rate"] <= 1.0 and 0 <= evaluation["eval_tasks_solved"] <= 3
