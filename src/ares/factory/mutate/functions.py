"""The functions an LLM strategy may rewrite: where they are, their source, their bare signature.

Only functions whose body has at least ``MIN_STATEMENTS`` statements besides the docstring are
offered: a one-line function rewritten is rarely a bug a test notices, and rarely worth a question.
The sample is seeded, so the same seed asks about the same functions.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import libcst as cst

from .candidates import source_files

MIN_STATEMENTS = 3


@dataclass(frozen=True)
class Function:
    """One function of one file: ``source`` is the whole function (decorators included, no leading
    comments) rendered at column 0; ``skeleton`` the same with the body cut to its docstring."""

    path: str
    qualname: str
    name: str
    source: str
    skeleton: str
    enclosing_class: str | None


def docstring_and_rest(body: cst.BaseSuite) -> tuple[list[cst.BaseStatement], list[cst.BaseStatement]]:
    """A function body's docstring statement (zero or one) and the statements after it."""
    if not isinstance(body, cst.IndentedBlock):
        return [], []
    statements = list(body.body)
    first = statements[0] if statements else None
    if (
        isinstance(first, cst.SimpleStatementLine)
        and len(first.body) == 1
        and isinstance(first.body[0], cst.Expr)
        and isinstance(first.body[0].value, cst.SimpleString | cst.ConcatenatedString)
    ):
        return [first], statements[1:]
    return [], statements


def walk(module: cst.Module) -> Iterator[tuple[str, cst.FunctionDef, str | None]]:
    """Every function of ``module`` with its ``__qualname__`` and the class it is a method of."""

    def visit(
        statements: Iterable[cst.BaseStatement], prefix: str, in_function: bool, owner: str | None
    ) -> Iterator[tuple[str, cst.FunctionDef, str | None]]:
        for stmt in statements:
            if not isinstance(stmt, cst.FunctionDef | cst.ClassDef):
                continue
            qualname = f"{prefix}{'<locals>.' if in_function else ''}{stmt.name.value}"
            body = stmt.body.body if isinstance(stmt.body, cst.IndentedBlock) else ()
            if isinstance(stmt, cst.FunctionDef):
                yield qualname, stmt, owner
                yield from visit(body, qualname + ".", True, None)
            else:
                yield from visit(body, qualname + ".", False, stmt.name.value)

    yield from visit(module.body, "", False, None)


def _skeleton(module: cst.Module, node: cst.FunctionDef) -> str:
    doc, _ = docstring_and_rest(node.body)
    stub = cst.SimpleStatementLine([cst.Expr(cst.Ellipsis())])
    body = cst.IndentedBlock([*doc, stub])
    return module.code_for_node(node.with_changes(body=body, leading_lines=()))


def file_functions(root: Path, path: str) -> list[Function]:
    """The functions of one file worth a question; a file that does not decode or parse has none."""
    try:
        module = cst.parse_module((root / path).read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, cst.ParserSyntaxError):
        return []
    found = []
    for qualname, node, owner in walk(module):
        if len(docstring_and_rest(node.body)[1]) < MIN_STATEMENTS:
            continue
        source = module.code_for_node(node.with_changes(leading_lines=()))
        found.append(Function(path, qualname, node.name.value, source, _skeleton(module, node), owner))
    return found


def sample_functions(root: Path, package_dirs: Iterable[str], count: int, *, seed: int = 0) -> list[Function]:
    """At most ``count`` functions of the project's non-test sources, a seeded sample in file order."""
    pool = [f for path in source_files(Path(root), package_dirs) for f in file_functions(Path(root), path)]
    if len(pool) > count:
        chosen = set(random.Random(f"llm\0{seed}").sample(range(len(pool)), count))
        pool = [f for i, f in enumerate(pool) if i in chosen]
    return pool
