"""Local GGUF policy throughput on this machine: prompt (prefill) and generation tokens/s.

Loads the bundled SmolLM2-135M-Instruct (or ``--model PATH.gguf``) once, then times greedy answers
through ``LocalChatClient`` one at a time and ``--parallel`` at once. Tokens/s come from the
client's own view (tokens over wall time) and from llama.cpp's timings for one raw completion.

``--hog`` runs a busy loop pinned to one CPU beside the model (started before it loads, so the
automatic thread count sees it); ``--threads N`` fixes the thread count (0: automatic, the
default; the old default was one per core). ``--matrix`` runs fresh processes of this script,
alternating {one thread per core, automatic} x {quiet, hog} for ``--rounds`` rounds, and prints
their generation tokens/s side by side with the load average before each.

    .venv/bin/python bench/local_model.py [--model PATH.gguf] [--requests 6] [--max-tokens 128]
    .venv/bin/python bench/local_model.py --matrix [--rounds 2] [--requests 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from _common import machine_info
from ares.llm.local import LocalChatClient
from ares.llm.local.threads import allowed_cpus
from ares.llm.types import LLMRequest, SamplingParams, user

PROMPT = "Write a Python function that returns the n-th Fibonacci number, then explain it. " * 4
HOG = "import os, sys; os.sched_setaffinity(0, {int(sys.argv[1])}); print(flush=True)\nwhile True: pass"


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


@contextmanager
def cpu_hog(on: bool) -> Iterator[int | None]:
    """A busy loop pinned to the last CPU this process may use (its number), or nothing."""
    if not on:
        yield None
        return
    cpu = max(allowed_cpus())
    proc = subprocess.Popen([sys.executable, "-c", HOG, str(cpu)], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"\n"
        time.sleep(0.5)  # let it show in /proc/stat as a busy CPU
        yield cpu
    finally:
        proc.kill()
        proc.wait()


async def main(args: argparse.Namespace) -> dict[str, Any]:
    with cpu_hog(args.hog) as hog_cpu:
        client = LocalChatClient(args.model, threads=args.threads)
        started = time.perf_counter()
        model = await client.model()
        load_s = time.perf_counter() - started
        await client(request(-1, 8))  # warm-up
        result = {
            "bench": "local_model",
            "machine": machine_info(),
            "model": model.name,
            "slots": model.parallel,
            "threads": model.threads,
            "threads_asked": args.threads or "auto",
            "hog_cpu": hog_cpu,
            "load_s": round(load_s, 3),
            "llama_cpp_timings": await raw_timings(client, args.max_tokens),
            "sequential": await batch(client, args.requests, args.max_tokens, concurrent=False),
        }
        if not args.sequential_only:
            result["concurrent"] = await batch(client, args.requests, args.max_tokens, concurrent=True)
        return result


def matrix(args: argparse.Namespace) -> dict[str, Any]:
    """Fresh processes, alternating: before (one thread per core) and after (automatic), quiet and
    beside the hog, ``args.rounds`` times; llama.cpp's and the client's generation tokens/s."""
    cores = len(allowed_cpus())
    rows = []
    for round_ in range(1, args.rounds + 1):
        for threads, label in ((cores, "before: one per core"), (0, "after: automatic")):
            for hog in (False, True):
                cmd = [sys.executable, __file__, "--threads", str(threads), "--sequential-only"]
                cmd += ["--requests", str(args.requests), "--max-tokens", str(args.max_tokens)]
                cmd += ["--hog"] * hog + (["--model", args.model] if args.model else [])
                load = os.getloadavg()
                out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
                rows.append({
                    "round": round_, "threads": label, "used": out["threads"], "hog": hog,
                    "loadavg_1m_before": round(load[0], 2),
                    "llama_cpp_generation_tokens_per_s": out["llama_cpp_timings"]["generation_tokens_per_s"],
                    "client_completion_tokens_per_s": out["sequential"]["completion_tokens_per_s"],
                })  # fmt: skip
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return {"bench": "local_model --matrix", "machine": machine_info(), "rows": rows}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="a GGUF file (default: the bundled SmolLM2-135M)")
    parser.add_argument("--requests", type=int, default=6)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--threads", type=int, default=0, help="llama.cpp threads (0: automatic)")
    parser.add_argument("--hog", action="store_true", help="a busy loop pinned to one CPU beside the model")
    parser.add_argument("--sequential-only", action="store_true", help="skip the concurrent batch")
    parser.add_argument("--matrix", action="store_true", help="before/after x quiet/hog, fresh processes")
    parser.add_argument("--rounds", type=int, default=2)
    cli = parser.parse_args()
    print(json.dumps(matrix(cli) if cli.matrix else asyncio.run(main(cli)), indent=2))
