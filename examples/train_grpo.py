"""GRPO on a CPU: SmolLM2-135M-Instruct learns HumanEval tasks from rewards of ARES environments.

Each optimizer step samples k solutions for each task through ARES (``humaneval-single``: one reply
is the whole solution, the sandboxed verifier gives reward 0 or 1), scores each sample against its
group (advantage = (reward - group mean) / (group std + eps)) and takes one AdamW step on

    loss = mean over samples of -advantage * sum of the completion's token logprobs
           + beta * mean over tokens of the k3 KL estimate to the frozen starting model.

Sampling is on-policy: ``TransformersPolicy`` generates with the very model being trained, and
the logprobs it records are checked against the trainer's own forward pass on the same token ids.
A llama.cpp sample (``--policy local``, the Q4_1 GGUF) is re-scored too, to show how far the
quantized server is from the dequantized float model the trainer holds.

    .venv/bin/pip install torch==2.13.0 accelerate gguf   # a CPU wheel; transformers>=5 too
    .venv/bin/python examples/train_grpo.py [--steps 20] [--tasks 8] [--k 4] [--out grpo.jsonl]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import math
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

import ares
from ares.llm import PROMPT_TOKEN_IDS_KEY
from ares.llm.local.model import default_model_path
from ares.llm.types import LLMResponse
from ares.policies import PolicyFactory, make_policy
from ares.policies.transformers_policy import GenerationSettings, TransformersPolicy
from ares.records import EpisodeRecord, StepRecord
from ares.records.collectors import NullCollector
from ares.rollout.runner import run_episodes

PRESET = "humaneval-single"


@dataclass(frozen=True, slots=True)
class Sample:
    """One rollout: its group (task), reward, and the exact token ids the policy saw and produced."""

    group: int
    reward: float
    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    logprobs: tuple[float, ...]


class ActionCollector(NullCollector):
    """A TrajectoryCollector keeping, per episode number, the first LLM answer (the solution)."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.actions: dict[int, LLMResponse] = {}

    def begin_episode(self, episode: EpisodeRecord) -> None:
        self.index[episode.episode_id] = int(episode.metadata.get("episode_index", len(self.index)))

    def record_step(self, episode_id: str, step: StepRecord) -> None:
        number = self.index[episode_id]
        if isinstance(step.action, LLMResponse) and number not in self.actions:
            self.actions[number] = step.action


async def rollouts(policy: PolicyFactory, count: int, k: int, seed: int) -> list[Sample]:
    """k episodes of each of the first ``count`` tasks; episodes without a scored token-level answer
    (errored, or the policy gave no token ids) are dropped."""
    collector, tasks = ActionCollector(), f"0:{count}"
    results = await run_episodes(
        lambda: ares.make(PRESET, tasks=tasks), policy, episodes=count * k, group_size=k,
        concurrency=count * k, seed=seed, collector=collector, trace="off",
    )  # fmt: skip
    samples = []
    for result in results:
        action = collector.actions.get(result.index)
        if result.reward is None or action is None or not action.token_ids or action.logprobs is None:
            continue
        prompt = tuple(action.extra[PROMPT_TOKEN_IDS_KEY])
        samples.append(
            Sample(result.group or 0, result.reward, prompt, tuple(action.token_ids), tuple(action.logprobs))
        )
    return samples


def token_logprobs(model: Any, prompt: tuple[int, ...], completion: tuple[int, ...]) -> torch.Tensor:
    """log p(completion token t | prompt, earlier tokens) under ``model``, one per completion token."""
    ids = torch.tensor([[*prompt, *completion]])
    logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
    return torch.log_softmax(logits, dim=-1).gather(-1, ids[0, len(prompt) :, None]).squeeze(-1)


def advantages(samples: list[Sample], eps: float = 1e-4) -> list[float]:
    """Group-relative advantages: each reward against its own group's mean and spread."""
    groups: dict[int, list[float]] = {}
    for s in samples:
        groups.setdefault(s.group, []).append(s.reward)
    stats = {g: (statistics.fmean(r), statistics.pstdev(r)) for g, r in groups.items()}
    return [(s.reward - stats[s.group][0]) / (stats[s.group][1] + eps) for s in samples]


def train_step(
    model: Any, reference: Any, optimizer: torch.optim.Optimizer, samples: list[Sample], beta: float
) -> dict[str, float]:
    """One AdamW step on the GRPO loss; gradients are accumulated sample by sample to bound memory."""
    optimizer.zero_grad()
    tokens = sum(len(s.completion_ids) for s in samples)
    loss_total, kl_total, diff = 0.0, 0.0, 0.0
    for s, advantage in zip(samples, advantages(samples), strict=True):
        current = token_logprobs(model, s.prompt_ids, s.completion_ids)
        with torch.no_grad():
            ref = token_logprobs(reference, s.prompt_ids, s.completion_ids)
        log_ratio = ref - current
        kl = (torch.expm1(log_ratio) - log_ratio).clamp_min(0)  # k3: unbiased and >= 0 (up to rounding)
        loss = -advantage * current.sum() / len(samples) + beta * kl.sum() / tokens
        loss.backward()
        loss_total += loss.item()
        kl_total += kl.sum().item()
        recorded = torch.tensor(s.logprobs)
        diff = max(diff, (current.detach() - recorded).abs().max().item())
    optimizer.step()
    return {"loss": loss_total, "kl": kl_total / tokens, "logprob_max_abs_diff": diff}


def load(path: str) -> tuple[Any, Any]:
    """The GGUF as a float transformers model (dequantized) and its tokenizer."""
    folder, name = os.path.split(path)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    return model, tokenizer


def check_local(model: Any, max_new_tokens: int, seed: int) -> dict[str, Any]:
    """Re-score one llama.cpp (Q4_1) sample with the float model: how far apart the two policies are."""
    local = make_policy("local", temperature=1.0, max_tokens=max_new_tokens)
    samples = asyncio.run(rollouts(local, 1, 1, seed))
    if not samples:
        return {"check": "local", "tokens": 0}
    s = samples[0]
    with torch.no_grad():
        rescored = token_logprobs(model, s.prompt_ids, s.completion_ids)
    diff = (rescored - torch.tensor(s.logprobs)).abs()
    return {
        "check": "local", "tokens": len(s.completion_ids), "max_abs_diff": diff.max().item(),
        "mean_abs_diff": diff.mean().item(),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="optimizer steps (one fresh batch each)")
    parser.add_argument("--tasks", type=int, default=8, help="HumanEval tasks 0..N-1, all used each step")
    parser.add_argument("--k", type=int, default=4, help="samples per task (the GRPO group size)")
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--beta", type=float, default=0.04, help="weight of the KL penalty")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("grpo.jsonl"), help="JSONL log, one line a step")
    parser.add_argument("--skip-local-check", action="store_true", help="skip the llama.cpp re-score")
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)
    model, tokenizer = load(default_model_path())
    reference = copy.deepcopy(model).eval().requires_grad_(False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    batch = args.tasks * args.k
    policy = TransformersPolicy(model, tokenizer, GenerationSettings(args.max_new_tokens, batch_size=batch))
    log: list[dict[str, Any]] = []
    with args.out.open("w") as out:

        def write(entry: dict[str, Any]) -> None:
            log.append(entry)
            out.write(json.dumps(entry) + "\n")
            out.flush()
            print(json.dumps(entry))

        if not args.skip_local_check:
            write(check_local(model, args.max_new_tokens, args.seed))
        for step in range(args.steps):
            started = time.monotonic()
            samples = asyncio.run(rollouts(policy, args.tasks, args.k, args.seed + step * batch))
            sampled = time.monotonic()
            stats = train_step(model, reference, optimizer, samples, args.beta) if samples else {}
            rewards = [s.reward for s in samples]
            write({
                "step": step, "samples": len(samples),
                "mean_reward": statistics.fmean(rewards) if rewards else math.nan,
                **stats, "sample_s": sampled - started, "wall_s": time.monotonic() - started,
                "completion_tokens": sum(len(s.completion_ids) for s in samples),
            })  # fmt: skip
    return log


if __name__ == "__main__":
    main()
