"""``candidates``: every single-edit mutation of a project's non-test sources, in a stable order.

Files are walked in sorted path order, functions in source order, strategies in registry order.
With ``limit_per_function`` each function contributes at most that many, drawn round-robin across
strategies from per-strategy shuffles seeded by (seed, path, qualname): the same seed gives the same
list, and no strategy crowds out the others in a function.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from .collect import Site, collect
from .mutation import Mutation
from .operator import Operator
from .registry import select
from .render import ModuleText

_TEST_DIRS = frozenset({"tests", "test", "testing"})


def _is_test(rel: Path) -> bool:
    name = rel.name
    if name == "conftest.py" or name.startswith("test_") or name.endswith("_test.py"):
        return True
    return any(part in _TEST_DIRS or part.startswith(".") or part == "__pycache__" for part in rel.parts)


def source_files(root: Path, package_dirs: Iterable[str]) -> list[str]:
    """The non-test ``.py`` files under ``package_dirs`` (relative to ``root``), sorted, as POSIX paths."""
    found: set[str] = set()
    for package_dir in package_dirs:
        base = root / package_dir
        if not base.is_dir():
            raise ValueError(f"package directory not found: {base}")
        for path in base.rglob("*.py"):
            rel = path.relative_to(root)
            if path.is_file() and not _is_test(rel):
                found.add(rel.as_posix())
    return sorted(found)


def _order(sites: Sequence[Site], operators: tuple[Operator, ...], rng: random.Random | None) -> list[Site]:
    """Sites of one function: by strategy, or (sampling) round-robin over per-strategy shuffles."""
    rank = {op.strategy: i for i, op in enumerate(operators)}
    buckets: dict[str, list[Site]] = {}
    for site in sorted(sites, key=lambda s: rank[s.strategy]):
        buckets.setdefault(site.strategy, []).append(site)
    if rng is None:
        return [site for bucket in buckets.values() for site in bucket]
    for bucket in buckets.values():
        rng.shuffle(bucket)
    ordered: list[Site] = []
    queues = list(buckets.values())
    depth = 0
    while len(ordered) < len(sites):
        ordered.extend(queue[depth] for queue in queues if depth < len(queue))
        depth += 1
    return ordered


def _compiles(source: str, path: str) -> bool:
    try:
        compile(source, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


def file_candidates(
    root: Path,
    path: str,
    operators: tuple[Operator, ...],
    *,
    seed: int = 0,
    limit_per_function: int | None = None,
) -> Iterator[Mutation]:
    """The mutations of one file; files that do not decode, parse or compile here yield none."""
    try:
        before = (root / path).read_bytes().decode("utf-8")
        module = cst.parse_module(before)
    except (UnicodeDecodeError, cst.ParserSyntaxError):
        return
    if not _compiles(before, path):
        return
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    text = ModuleText(before, module)
    functions: dict[str, list[Site]] = {}
    for site in collect(module, operators):
        functions.setdefault(site.qualname, []).append(site)
    seen: set[bytes] = set()
    for qualname, sites in functions.items():
        rng = None if limit_per_function is None else random.Random(f"{seed}\0{path}\0{qualname}")
        kept = 0
        for site in _order(sites, operators, rng):
            if limit_per_function is not None and kept >= limit_per_function:
                break
            rendered = text.render(site)
            after = rendered.after
            digest = hashlib.blake2b(after.encode(), digest_size=16).digest()
            if after == before or digest in seen or not _compiles(rendered.statement, path):
                continue
            seen.add(digest)
            line = positions[site.edit.anchor].start.line
            kept += 1
            yield Mutation(site.strategy, path, qualname, line, site.edit.description, before, after)


def candidates(
    root: Path,
    package_dirs: Iterable[str],
    *,
    strategies: Iterable[str] | None = None,
    seed: int = 0,
    limit_per_function: int | None = None,
) -> Iterator[Mutation]:
    """Single-edit mutations of the project at ``root`` (see the module docstring for the order)."""
    operators = select(strategies)
    if limit_per_function is not None and limit_per_function < 1:
        raise ValueError(f"limit_per_function must be at least 1, not {limit_per_function}")
    for path in source_files(Path(root), package_dirs):
        yield from file_candidates(
            Path(root), path, operators, seed=seed, limit_per_function=limit_per_function
        )
