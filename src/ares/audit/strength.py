"""Test strength: mutants of the gold-patched code near the fix, and the share the tests still accept.

The mutants come from the task factory's operators (``ares.factory.mutate``) applied to the
reference code: HumanEval's and a single-file Harbor task's reference solution (all of it: the fix
is the whole body), a SWE task's gold-patched files (read from a sandbox of the task's image with the
gold patch applied), kept within ``radius`` lines of a line the patch changed. Each mutant is played
as an episode: the gold patch, then the mutated file over it. A test suite that accepts most of them
checks little of the behaviour it is meant to pin; its score is the share it rejects.
"""

from __future__ import annotations

import asyncio
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ares.audit.target import kind_of
from ares.sandbox.base import SandboxFactory
from ares.tasks.model import Task

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")


@dataclass(frozen=True, slots=True)
class Mutant:
    """One mutated file, whole (``path`` relative to the workdir), and whether the gold patch goes first."""

    path: str
    text: str
    description: str
    after_gold: bool


@dataclass(frozen=True, slots=True)
class MutantPlan:
    """A task's mutants, or why it has none (``note``)."""

    mutants: tuple[Mutant, ...] = ()
    note: str = ""


def changed_lines(patch: str) -> dict[str, set[int]]:
    """The new-side line numbers each file of a unified diff adds or changes (deletions: the line after)."""
    lines: dict[str, set[int]] = {}
    path, number = None, 0
    for line in patch.splitlines():
        if line.startswith("+++ "):
            raw = line[4:].split("\t", 1)[0]
            path = None if raw == "/dev/null" else raw[2:] if raw[:2] == "b/" else raw
            continue
        hunk = _HUNK.match(line)
        if hunk:
            number = int(hunk.group(1))
            continue
        if path is None or line.startswith(("--- ", "diff ", "index ")):
            continue
        if line.startswith("+"):
            lines.setdefault(path, set()).add(number)
            number += 1
        elif line.startswith("-"):
            lines.setdefault(path, set()).add(number)
        elif line.startswith(" "):
            number += 1
    return lines


def spread(items: Sequence[Mutant], limit: int) -> list[Mutant]:
    """At most ``limit`` items, evenly spaced over the list (the same every time)."""
    if len(items) <= limit:
        return list(items)
    step = len(items) / limit
    return [items[int(i * step)] for i in range(limit)]


def mutate_file(
    path: str, text: str, changed: set[int] | None, radius: int, *, after_gold: bool
) -> list[Mutant]:
    """The factory's single-edit mutants of ``text`` (at ``path``), near ``changed`` (None: anywhere)."""
    from ares.factory.mutate import OPERATORS
    from ares.factory.mutate.candidates import file_candidates

    with tempfile.TemporaryDirectory(prefix="ares-audit-") as tmp:
        target = Path(tmp) / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        found = list(file_candidates(Path(tmp), path, OPERATORS))
    kept = [m for m in found if changed is None or any(abs(m.line - c) <= radius for c in changed)]
    return [
        Mutant(path, m.after, f"{m.strategy} at line {m.line}: {m.description}", after_gold) for m in kept
    ]


async def plan_mutants(
    task: Task, sandbox_factory: SandboxFactory, *, radius: int = 8, limit: int = 20
) -> MutantPlan:
    """The mutants of ``task`` (see the module docstring); a note instead when it has none."""
    try:
        import libcst  # noqa: F401
    except ImportError:
        return MutantPlan(note="mutants need libcst: pip install 'ares[synth]'")
    kind = kind_of(task)
    if kind == "swe":
        return await _swe_mutants(task, sandbox_factory, radius, limit)
    solution = task.solution
    if (
        task.solution_file is None
        or not task.solution_file.endswith(".py")
        or not isinstance(solution, dict | Path)
    ):
        return MutantPlan(note="no single-file Python reference solution to mutate")
    from ares.errors import PolicyError
    from ares.policies.scripted import reference_solution

    try:
        text = reference_solution(task)
    except PolicyError as exc:
        return MutantPlan(note=str(exc))
    found = await asyncio.to_thread(mutate_file, task.solution_file, text, None, radius, after_gold=False)
    return MutantPlan(tuple(spread(found, limit)), "" if found else "no mutant of the reference solution")


async def _swe_mutants(task: Task, sandbox_factory: SandboxFactory, radius: int, limit: int) -> MutantPlan:
    patch = task.solution.get("fix.patch") if isinstance(task.solution, dict) else None
    if not isinstance(patch, str):
        return MutantPlan(note="no gold patch")
    changed = {p: lines for p, lines in changed_lines(patch).items() if p.endswith(".py")}
    if not changed:
        return MutantPlan(note="the gold patch changes no Python file")
    sandbox = sandbox_factory(task.sandbox_spec())
    texts: dict[str, str] = {}
    async with sandbox:
        applied = await sandbox.exec(
            "git apply - || patch -p1 --batch --forward",
            cwd=task.workdir,
            stdin=patch.encode(),
            timeout_s=120,
        )
        if not applied.ok:
            return MutantPlan(note=f"the gold patch did not apply: {applied.stderr.strip()[:200]}")
        for path in changed:
            texts[path] = (await sandbox.read_file(f"{task.workdir}/{path}")).decode("utf-8", "replace")
    found: list[Mutant] = []
    for path, text in texts.items():
        found += await asyncio.to_thread(mutate_file, path, text, changed[path], radius, after_gold=True)
    return MutantPlan(
        tuple(spread(found, limit)), "" if found else f"no mutant within {radius} lines of the fix"
    )
