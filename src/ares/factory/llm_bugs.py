"""The LLM strategies: bugs a policy writes into a seeded sample of the project's functions.

``llm_rewrite`` shows the policy a function's signature and docstring only and asks for the whole
function (SWE-smith's "LM rewrite": whatever it gets wrong is the bug); ``llm_modify`` shows the whole
function and asks for the same function with one subtle bug. Each answer is spliced in place of the
function (``mutate.splice``) and becomes an ordinary ``Mutation`` with ``author`` set to the policy,
validated in forks like any other candidate. Answers are cached in ``work/llm_answers.jsonl`` by
question, so a resumed run asks nothing twice.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ares.factory.asking import Asker
from ares.factory.mutate import Mutation
from ares.factory.mutate.functions import Function, sample_functions
from ares.factory.mutate.splice import Refused, splice

LLM_REWRITE = "llm_rewrite"
LLM_MODIFY = "llm_modify"
LLM_STRATEGIES = (LLM_REWRITE, LLM_MODIFY)
#: Questions in flight at once (a local model queues them itself; an API answers them in parallel).
CONCURRENCY = 4

SYSTEM = (
    "You are an expert Python programmer. You answer with one complete Python function in a single "
    "```python code block and nothing else: no explanation, no usage example, no imports."
)


def _where(function: Function) -> str:
    module = function.path.removesuffix(".py").replace("/", ".").removesuffix(".__init__")
    owner = f" (a method of class {function.enclosing_class})" if function.enclosing_class else ""
    return f"from the module `{module}`{owner}"


def prompt(strategy: str, function: Function) -> str:
    """The user message of one question."""
    if strategy == LLM_REWRITE:
        return (
            f"Implement the Python function `{function.name}` {_where(function)} from its signature and "
            "docstring. Reply with the complete function, same name and signature, in one ```python "
            f"block.\n\n```python\n{function.skeleton}```\n"
        )
    if strategy == LLM_MODIFY:
        return (
            f"Here is the Python function `{function.name}` {_where(function)}. Introduce exactly one "
            "subtle bug: a small change to its logic so that it still runs but gives wrong results for "
            "some inputs. Keep its name and signature. Do not add comments and do not mention the bug. "
            "Reply with the complete modified function in one ```python block.\n\n"
            f"```python\n{function.source}```\n"
        )
    raise ValueError(f"not an LLM strategy: {strategy}")


def _key(policy: str, strategy: str, function: Function, text: str) -> str:
    return hashlib.sha256(
        "\0".join((policy, strategy, function.path, function.qualname, text)).encode()
    ).hexdigest()


def _read_cache(path: Path) -> dict[str, str]:
    if not path.exists():
        return {}
    cached = {}
    for line in path.read_text().splitlines():
        try:
            entry = json.loads(line)
            cached[str(entry["key"])] = str(entry["text"])
        except (ValueError, KeyError, TypeError):
            continue  # a torn last line from a kill mid-write
    return cached


def _append(path: Path, key: str, text: str) -> None:
    with path.open("a") as f:
        f.write(json.dumps({"key": key, "text": text}) + "\n")


async def llm_mutations(
    root: Path,
    package_dirs: Sequence[str],
    asker: Asker,
    strategies: Iterable[str],
    *,
    functions: int,
    seed: int = 0,
    cache: Path,
) -> tuple[list[Mutation], dict[str, Any]]:
    """The mutations the policy wrote, and per strategy: questions, answers, spliced, refused by reason."""
    chosen = [s for s in LLM_STRATEGIES if s in set(strategies)]
    sample = await asyncio.to_thread(sample_functions, root, package_dirs, functions, seed=seed)
    cached = await asyncio.to_thread(_read_cache, cache)
    sources: dict[str, str] = {}
    for path in {f.path for f in sample}:
        data = await asyncio.to_thread((root / path).read_bytes)
        sources[path] = data.decode("utf-8")  # as the procedural candidates read it: newlines kept
    tally: dict[str, Counter[str]] = {s: Counter() for s in chosen}
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(strategy: str, function: Function) -> Mutation | None:
        counts = tally[strategy]
        text = prompt(strategy, function)
        key = _key(asker.name, strategy, function, text)
        counts["questions"] += 1
        answer = cached.get(key)
        if answer is None:
            async with gate:
                answer = await asker.ask(SYSTEM, text, purpose=strategy)
            if answer is None:
                counts["no_answer"] += 1
                return None
            await asyncio.to_thread(_append, cache, key, answer)
        counts["answers"] += 1
        try:
            mutation = splice(sources[function.path], function, answer, strategy=strategy, author=asker.name)
        except Refused as refused:
            counts[f"refused:{refused.reason}"] += 1
            return None
        counts["spliced"] += 1
        return mutation

    jobs = [one(strategy, function) for function in sample for strategy in chosen]
    made = [m for m in await asyncio.gather(*jobs) if m is not None]
    report = {
        "policy": asker.name,
        "functions": len(sample),
        "by_strategy": {s: dict(sorted(c.items())) for s, c in tally.items()},
        "asking": asker.report(),
    }
    return made, report
