"""Local GGUF policy throughput on this machine: prompt (prefill) and generation tokens/s.

Loads the bundled SmolLM2-135M-Instruct (or ``--model PATH.gguf``) once, then times greedy answers
through ``LocalChatClient`` one at a time and ``--parallel`` at once. Tokens/s come from the
client's own view (tokens over wall time) and from llama.cpp's timings for one raw completion.

    .venv/bin/python bench/local_model.py [--model PATH.gguf] [--requests 6] [--max-tokens 128]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from _common import machine_info
from ares.llm.local import LocalChatClient
from ares.llm.types import LLMRequest, SamplingParams, user

PROMPT = "Write a Python function that returns the n-th Fibonacci number, then explain it. " * 4


def request(i: int, max_tokens: int) -> LLMRequest:
    sampling = SamplingParams(temperature=0.0, max_tokens=max_tokens)
    return LLMRequest(
        (user(f"[{i}] {PROMPT}"),), system_prompt="You are a coding assistant.", sampling=sampling
    )


async def batch(client: LocalChatClient, n: int, max_tokens: int, concurrent: bool) -> dict[str, Any]:
    started = time.perf_counter()
    if concurrent:
        answers = await asyncio.gather(*(client(request(i, max_tokens)) for i in range(n)))
    else:
        answers = [await client(request(i, max_tokens)) for i in range(n)]
    wall = time.perf_counter() - started
    completion = sum(a.usage.completion_tokens for a in answers if a.usage)
    prompt = sum(a.usage.prompt_tokens for a in answers if a.usage)
    return {
        "requests": n,
        "wall_s": round(wall, 3),
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "end_to_end_tokens_per_s": round((prompt + completion) / wall, 1),
        "completion_tokens_per_s": round(completion / wall, 1),
    }


async def raw_timings(client: LocalChatClient, max_tokens: int) -> dict[str, Any]:
    """llama.cpp's own prefill/decode speeds for one uncached completion."""
    model = await client.model()
    ids = await client.prompt_ids(request(10_000, max_tokens))
    params = {**client.params(request(0, max_tokens)), "cache_prompt": False}
    timings = (await model.complete(ids, params))["timings"]
    return {
        "prompt_tokens": timings["prompt_n"],
        "prompt_tokens_per_s": round(timings["prompt_per_second"], 1),
        "generated_tokens": timings["predicted_n"],
        "generation_tokens_per_s": round(timings["predicted_per_second"], 1),
    }


async def main(args: argparse.Namespace) -> dict[str, Any]:
    client = LocalChatClient(args.model)
    started = time.perf_counter()
    model = await client.model()
    load_s = time.perf_counter() - started
    await client(request(-1, 8))  # warm-up
    return {
        "bench": "local_model",
        "machine": machine_info(),
        "model": model.name,
        "slots": model.parallel,
        "threads": model.settings.threads,
        "load_s": round(load_s, 3),
        "llama_cpp_timings": await raw_timings(client, args.max_tokens),
        "sequential": await batch(client, args.requests, args.max_tokens, concurrent=False),
        "concurrent": await batch(client, args.requests, args.max_tokens, concurrent=True),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="a GGUF file (default: the bundled SmolLM2-135M)")
    parser.add_argument("--requests", type=int, default=6)
    parser.add_argument("--max-tokens", type=int, default=128)
    print(json.dumps(asyncio.run(main(parser.parse_args())), indent=2))
