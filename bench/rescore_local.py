"""How far the local policy's recorded logprobs are from the trainer's float model, over a whole run.

Reads the trajectories of a ``--policy local`` run (``ares run ... --out DIR``: DIR/trajectories),
turns each episode into its exact ``TokenSequence`` and re-scores every sampled token with the same
GGUF loaded as a float ``transformers`` model. llama.cpp runs the Q4_1 weights with quantized
activations, so the two disagree by a measurable amount: this prints how much.

    .venv/bin/python bench/rescore_local.py /tmp/he-local [--micro-batch 4]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from _common import machine_info
from ares.llm.local.default_model import default_model_path
from ares.records.loader import load_episodes
from ares.training import episode_sequences
from ares.training.gguf import load_gguf_as_float
from ares.training.scoring import completion_logprobs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="the --out directory of an `ares run --policy local`")
    parser.add_argument("--model", default=None, help="the GGUF the run used (default: the bundled one)")
    parser.add_argument("--micro-batch", type=int, default=4)
    args = parser.parse_args()
    sequences = [s for s in episode_sequences(load_episodes(args.run / "trajectories")) if s.logprobs]
    model, tokenizer = load_gguf_as_float(args.model or default_model_path())
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    diffs, agree, started = [], 0, time.monotonic()
    with torch.inference_mode():
        for start in range(0, len(sequences), args.micro_batch):
            chunk = sorted(sequences, key=lambda s: len(s.prompt_ids))[start : start + args.micro_batch]
            scored, mask = completion_logprobs(model, chunk, pad)
            for row, s in enumerate(chunk):
                n = len(s.completion_ids)
                recorded = torch.tensor(s.logprobs)
                keep = mask[row, :n].bool()
                diffs.append((scored[row, :n] - recorded)[keep].abs())
                agree += int(torch.allclose(scored[row, :n][keep], recorded[keep], atol=0.5))
    every = torch.cat(diffs)
    print(json.dumps({
        "machine": machine_info(), "sequences": len(sequences), "tokens": every.numel(),
        "max_abs_diff": every.max().item(), "mean_abs_diff": every.mean().item(),
        "p50_abs_diff": every.quantile(0.5).item(), "p99_abs_diff": every.quantile(0.99).item(),
        "sequences_all_within_0.5": agree, "rescore_s": time.monotonic() - started,
    }, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
