"""GRPO on a CPU: SmolLM2-135M-Instruct learns HumanEval tasks from rewards of ARES environments.

Each optimizer step samples k solutions for each task through ARES (``humaneval-single``: one reply
is the whole solution, the sandboxed verifier gives reward 0 or 1), scores each sample against its
group (advantage = (reward - group mean) / (group std + eps)) and takes one AdamW step on

    loss = mean over samples of -advantage * sum of the sampled tokens' logprobs
           + beta * mean over sampled tokens of the k3 KL estimate to the frozen starting model.

The data is ``ares.training``'s: each episode's ``TokenSequence`` holds the exact prompt ids the
policy was fed, the completion ids, the mask of sampled tokens (a multi-turn episode is one sequence
whose environment tokens are masked out) and the sampler's logprobs. Sampling is on-policy:
``TransformersPolicy`` generates with the very model being trained, and the logprobs it recorded
are checked against the trainer's own forward pass on the same ids. A llama.cpp sample
(``--policy local``, the Q4_1 GGUF) is re-scored too, to show how far the quantized server is from
the dequantized float model the trainer holds.

    .venv/bin/pip install -e '.[train]'        # torch==2.13.0 is the CPU wheel
    .venv/bin/python examples/train_grpo.py [--steps 20] [--tasks 0:8] [--k 4] [--train-layers 8]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import functools
import json
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

import ares
from ares.curriculum import parse_sampler
from ares.llm.local.default_model import default_model_path
from ares.policies import PolicyFactory, make_policy
from ares.policies.transformers_policy import GenerationSettings, TransformersPolicy
from ares.rollout import Curriculum, PolicyGate, RunSummary
from ares.rollout.runner import run_episodes
from ares.training import TokenSequence, collect_informative, collect_rollouts, group_advantages
from ares.training.gguf import load_gguf_as_float
from ares.training.scoring import completion_logprobs

PRESET = "humaneval-single"


@dataclass(frozen=True)
class Sampling:
    """Which groups a step plays: ``groups`` of the tasks (all of them, in order, by default), chosen
    by ``curriculum`` (pass rates learned across steps) and, with ``max_groups``, dynamic sampling:
    up to ``max_groups`` groups are played until ``groups`` carry signal (outcomes that disagree)."""

    tasks: str
    k: int
    groups: int
    curriculum: Curriculum | None = None
    max_groups: int | None = None


async def rollouts(
    policy: PolicyFactory, sampling: Sampling, step: int, seed: int, gate: PolicyGate | None = None
) -> tuple[list[TokenSequence], dict[str, Any]]:
    """Step ``step``'s groups as sequences (episodes without a reward are left out), and how many of
    the groups played carried no signal (all passed or all failed: zero advantage). Without a
    curriculum the steps go round the tasks in order; with one, every outcome feeds its pass rates."""
    task_list = ares.make(PRESET, tasks=sampling.tasks).tasks
    played = sampling.max_groups or sampling.groups
    if sampling.curriculum is not None:
        plan = sampling.curriculum.draw([t.id for t in task_list], played, seed)
    else:
        plan = [(step * played + g) % len(task_list) for g in range(played)]
    options: dict[str, Any] = {"group_size": sampling.k, "concurrency": played * sampling.k, "seed": seed}
    options |= {"gate": gate, "group_tasks": plan, "num_tasks": len(task_list)}
    if sampling.curriculum is not None:
        options["on_result"] = sampling.curriculum.observe  # the dropped groups' outcomes count too
    make_env = functools.partial(ares.make, PRESET, tasks=sampling.tasks)
    if sampling.max_groups is not None:
        batch, kept = await collect_informative(
            make_env, policy, groups=sampling.groups, max_groups=played, **options
        )
        counts = {"groups_played": kept.seen, "groups_without_signal": sum(kept.dropped.values())}
        counts["dropped"] = dict(kept.dropped)  # all_passed, all_failed, too_few (masked members)
    else:
        batch = await collect_rollouts(make_env, policy, episodes=played * sampling.k, **options)
        summary = RunSummary.of(list(batch.results), 0.0)
        counts = {"groups_played": played, "groups_without_signal": sum(summary.uninformative.values())}
        counts["dropped"] = dict(summary.uninformative)
        counts["episodes_masked"] = sum(r.masked for r in batch.results)
    return batch.scored(), counts


def train_step(
    model: Any,
    reference: Any | None,
    optimizer: torch.optim.Optimizer,
    samples: list[TokenSequence],
    **options: Any,
) -> dict[str, float]:
    """One AdamW step on the GRPO loss (``gradients``, then the step)."""
    stats = gradients(model, reference, optimizer, samples, **options)
    optimizer.step()
    return stats


#: Truncated importance sampling: a token's weight current/behaviour probability is capped here.
MAX_IMPORTANCE_WEIGHT = 2.0


def gradients(
    model: Any,
    reference: Any | None,
    optimizer: torch.optim.Optimizer,
    samples: list[TokenSequence],
    *,
    beta: float,
    pad_id: int,
    micro_batch: int,
    temperature: float,
    off_policy: bool = False,
) -> dict[str, float]:
    """The GRPO loss's gradients, accumulated over micro-batches to bound memory (the weights do not
    change). ``off_policy``: the samples came from older weights, so each sampled token's term is
    weighted by min(p_current / p_behaviour, ``MAX_IMPORTANCE_WEIGHT``), from the recorded logprobs."""
    optimizer.zero_grad()
    advantages = group_advantages(samples)
    tokens = sum(s.sampled_tokens for s in samples) or 1
    loss_total, kl_total, diff = 0.0, 0.0, 0.0
    for start in range(0, len(samples), micro_batch):
        chunk = samples[start : start + micro_batch]
        current, mask = completion_logprobs(model, chunk, pad_id, temperature)
        loss = torch.zeros(())
        if reference is not None and beta > 0:
            with torch.no_grad():
                ref, _ = completion_logprobs(reference, chunk, pad_id, temperature)
            log_ratio = ref - current
            kl = ((torch.expm1(log_ratio) - log_ratio).clamp_min(0) * mask).sum()  # k3: unbiased, >= 0
            loss = loss + beta * kl / tokens
            kl_total += kl.item()
        weights = torch.tensor(advantages[start : start + micro_batch])[:, None] * mask
        if off_policy:
            weights = weights * _importance(chunk, current.detach(), mask)
        loss = loss - (weights * current).sum() / len(samples)
        loss.backward()
        loss_total += loss.item()
        for row, s in enumerate(chunk):
            if s.logprobs is not None:
                sampled = torch.tensor(s.logprobs) - current[row, : len(s.logprobs)].detach()
                diff = max(diff, (sampled * mask[row, : len(s.logprobs)]).abs().max().item())
    return {"loss": loss_total, "kl": kl_total / tokens, "logprob_max_abs_diff": diff}


def _importance(chunk: list[TokenSequence], current: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-token min(exp(current - behaviour), cap) for sampled tokens (1 where nothing was recorded)."""
    behaviour = torch.zeros_like(current)
    for row, s in enumerate(chunk):
        if s.logprobs is not None:
            behaviour[row, : len(s.logprobs)] = torch.tensor(s.logprobs)
        else:
            behaviour[row] = current[row]
    return torch.exp(current - behaviour).clamp(max=MAX_IMPORTANCE_WEIGHT) * mask + (1 - mask)


def check_local(model: Any, tasks: str, max_new_tokens: int, seed: int, pad_id: int) -> dict[str, Any]:
    """Re-score one llama.cpp (Q4_1) sample with the float model: how far apart the two policies are."""
    local = make_policy("local", temperature=1.0, max_tokens=max_new_tokens)
    first = ares.make(PRESET, tasks=tasks).tasks[0].id
    samples, _ = asyncio.run(rollouts(local, Sampling(first, k=1, groups=1), 0, seed))
    if not samples:
        return {"check": "local", "tokens": 0}
    s = samples[0]
    with torch.no_grad():
        rescored, _ = completion_logprobs(model, [s], pad_id)
    diff = (rescored[0] - torch.tensor(s.logprobs)).abs()
    return {
        "check": "local", "tokens": len(s.completion_ids), "max_abs_diff": diff.max().item(),
        "mean_abs_diff": diff.mean().item(),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="optimizer steps (one fresh batch each)")
    parser.add_argument("--tasks", default="0:8", help="HumanEval task selection, all used each step")
    parser.add_argument("--k", type=int, default=4, help="samples per task (the GRPO group size)")
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument(
        "--temperature", type=float, default=0.7, help="sampling temperature; the loss scores logits / T"
    )
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--beta", type=float, default=0.04, help="weight of the KL penalty (0: no reference)")
    parser.add_argument("--micro-batch", type=int, default=8, help="sequences per forward/backward pass")
    parser.add_argument(
        "--train-layers", type=int, default=8, help="train only the last N decoder layers (0: every weight)"
    )
    parser.add_argument("--groups", type=int, default=None, help="groups per step (default: one per task)")
    parser.add_argument(
        "--sampler", default=None,
        help="choose each step's groups by the pass rates learned so far (informative, pools, skip-solved)",
    )  # fmt: skip
    parser.add_argument(
        "--dynamic-sampling", type=int, default=None, metavar="MAX_GROUPS",
        help="play up to MAX_GROUPS groups a step until --groups of them carry signal (outcomes that differ)",
    )  # fmt: skip
    parser.add_argument(
        "--eval-k", type=int, default=0, metavar="K",
        help="after training, K samples of every task at --temperature: the trained policy's pass rate",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("grpo.jsonl"), help="JSONL log, one line a step")
    parser.add_argument("--skip-local-check", action="store_true", help="skip the llama.cpp re-score")
    parser.add_argument(
        "--async", dest="overlap", action="store_true",
        help="sample step t+1 while step t computes its gradients (staleness 1, importance weights)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)
    started = time.monotonic()
    model, tokenizer = load_gguf_as_float(default_model_path())
    if args.train_layers:  # backward stops at the first trainable layer: much cheaper on a CPU
        model.requires_grad_(False)
        for module in [*model.model.layers[-args.train_layers :], model.model.norm]:
            module.requires_grad_(True)
    reference = copy.deepcopy(model).eval().requires_grad_(False) if args.beta > 0 else None
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.lr)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    count = len(ares.make(PRESET, tasks=args.tasks).tasks)
    curriculum = Curriculum(parse_sampler(args.sampler)) if args.sampler else None
    sampling = Sampling(args.tasks, args.k, args.groups or count, curriculum, args.dynamic_sampling)
    played = sampling.max_groups or sampling.groups
    settings = GenerationSettings(args.max_new_tokens, args.temperature, batch_size=played * args.k)
    policy = TransformersPolicy(model, tokenizer, settings)
    log: list[dict[str, Any]] = []
    with args.out.open("w") as out:

        def write(entry: dict[str, Any]) -> None:
            log.append(entry)
            out.write(json.dumps(entry) + "\n")
            out.flush()
            print(json.dumps(entry), flush=True)

        write({"setup_s": time.monotonic() - started, "tasks": count, "k": args.k, "groups": sampling.groups,
               "sampler": args.sampler, "dynamic_sampling": args.dynamic_sampling})  # fmt: skip
        if not args.skip_local_check:
            write(check_local(model, args.tasks, args.max_new_tokens, args.seed, pad_id))
        options = {
            "beta": args.beta, "pad_id": pad_id, "micro_batch": args.micro_batch,
            "temperature": args.temperature or 1.0,
        }  # fmt: skip
        train = train_async if args.overlap else train_sync
        asyncio.run(train(Run(model, reference, optimizer, policy, args, sampling, options, write)))
        if args.eval_k:
            write(asyncio.run(evaluate(policy, args.tasks, args.eval_k, args.seed + 10**6)))
        write({"total_wall_s": time.monotonic() - started})
    return log


async def evaluate(policy: PolicyFactory, tasks: str, k: int, seed: int) -> dict[str, Any]:
    """``k`` samples of every task with the weights as they are (seeds apart from training's): the
    share that passed, overall and per task."""
    began = time.monotonic()
    count = len(ares.make(PRESET, tasks=tasks).tasks)
    results = await run_episodes(
        functools.partial(ares.make, PRESET, tasks=tasks), policy, episodes=count * k, group_size=k,
        concurrency=count * k, seed=seed, keep_records=False,
    )  # fmt: skip
    passed = [r.passed for r in results if r.passed is not None]
    rate = sum(passed) / len(passed) if passed else None
    by_task: dict[str, int] = {}
    for r in results:
        by_task[r.task_id] = by_task.get(r.task_id, 0) + bool(r.passed)
    return {
        "eval_k": k, "eval_samples": len(passed), "eval_pass_rate": rate,
        "eval_tasks_solved": sum(n > 0 for n in by_task.values()), "eval_s": time.monotonic() - began,
    }  # fmt: skip


@dataclass(frozen=True)
class Run:
    """What a training loop works with: the model, its reference and optimizer, the policy sampling
    from it, the settings, which groups each step plays, the loss options and the log."""

    model: Any
    reference: Any | None
    optimizer: torch.optim.Optimizer
    policy: TransformersPolicy
    args: argparse.Namespace
    sampling: Sampling
    options: dict[str, Any]
    write: Callable[[dict[str, Any]], None]

    def seed(self, step: int) -> int:
        """The first episode seed of a step's batch (each batch's episodes get seeds of their own)."""
        played = self.sampling.max_groups or self.sampling.groups
        return int(self.args.seed + step * played * self.args.k)


def _entry(
    step: int,
    samples: list[TokenSequence],
    stats: dict[str, Any],
    times: dict[str, float],
    counts: dict[str, Any],
) -> dict[str, Any]:
    """One line of the log: the step's samples, rewards, losses, timings, versions and groups."""
    rewards = [s.reward for s in samples if s.reward is not None]
    return {
        "step": step, "samples": len(samples),
        "mean_reward": statistics.fmean(rewards) if rewards else math.nan,
        **stats, **times, "completion_tokens": sum(s.sampled_tokens for s in samples),
        "policy_versions": sorted({v for s in samples for _, _, v in s.version_segments}), **counts,
    }  # fmt: skip


async def train_sync(run: Run) -> None:
    """Sample a batch with the current weights, train on it, repeat: every sample on-policy."""
    args, policy = run.args, run.policy
    for step in range(args.steps):
        began = time.monotonic()
        samples, counts = await rollouts(policy, run.sampling, step, run.seed(step))
        sampled = time.monotonic()
        stats = train_step(run.model, run.reference, run.optimizer, samples, **run.options) if samples else {}
        policy.version = step + 1  # the next rollouts come from the weights this step made
        times = {"sample_s": sampled - began, "wall_s": time.monotonic() - began}
        run.write(_entry(step, samples, stats, times, counts))


async def train_async(run: Run) -> None:
    """Sample batch t+1 while batch t's gradients are computed (the weights do not change meanwhile);
    the optimizer steps only once no generation is in flight (``PolicyGate``), so every sample is
    from one version, at most one behind the weights it is trained with (importance weights)."""
    args, policy, gate = run.args, run.policy, PolicyGate()

    def batch(step: int) -> asyncio.Task[tuple[list[TokenSequence], dict[str, Any]]]:
        return asyncio.create_task(rollouts(policy, run.sampling, step, run.seed(step), gate=gate))

    pending = batch(0)
    for step in range(args.steps):
        began = time.monotonic()
        samples, counts = await pending
        sampled = time.monotonic()
        if step + 1 < args.steps:
            pending = batch(step + 1)  # sampled with version `step`, trained at step + 1
        stats = {}
        if samples:
            stats = await asyncio.to_thread(
                gradients, run.model, run.reference, run.optimizer, samples, off_policy=True, **run.options
            )
            await gate.pause()  # no generation in flight: swap the weights between two batches
            run.optimizer.step()
            policy.version = step + 1
            gate.resume()
        times = {"sample_s": sampled - began, "wall_s": time.monotonic() - began}
        run.write(_entry(step, samples, stats, times, counts))


if __name__ == "__main__":
    main()
