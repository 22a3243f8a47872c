"""Find every edit the operators propose inside function bodies of one parsed module.

Only code in function bodies is mutated: module- and class-level code runs at import, where a bug
breaks the import instead of a test. Annotations, decorators and f-strings are skipped too.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from .operator import Context, Edit, Operator

_SKIPPED = (cst.Annotation, cst.Decorator, cst.FormattedString, cst.ConcatenatedString, cst.SimpleString)


@dataclass(frozen=True)
class Site:
    """One proposed edit: which strategy, in which function, and the path from the top-level statement."""

    strategy: str
    qualname: str
    top: int
    ancestors: tuple[cst.CSTNode, ...]
    edit: Edit


class _Collector(cst.CSTVisitor):
    def __init__(self, operators: tuple[Operator, ...], top: int, sites: list[Site]) -> None:
        self._by_type: dict[type[cst.CSTNode], list[Operator]] = {}
        for op in operators:
            for node_type in op.node_types:
                self._by_type.setdefault(node_type, []).append(op)
        self._top = top
        self._sites = sites
        self._stack: list[cst.CSTNode] = []
        self._scopes: list[tuple[str, bool]] = []  # (name, is_function)
        self._functions = 0
        self._conditions = 0

    def _qualname(self) -> str:
        parts: list[str] = []
        for i, (name, _) in enumerate(self._scopes):
            if i and self._scopes[i - 1][1]:
                parts.append("<locals>")
            parts.append(name)
        return ".".join(parts)

    def on_visit(self, node: cst.CSTNode) -> bool:
        self._stack.append(node)
        if isinstance(node, _SKIPPED):
            return False
        ops = self._by_type.get(type(node)) if self._functions else None
        if ops:
            ancestors = tuple(self._stack[:-1])
            ctx = Context(parents=ancestors, in_condition=self._conditions > 0)
            qualname = self._qualname()
            for op in ops:
                for edit in op.edits(node, ctx):
                    self._sites.append(Site(op.strategy, qualname, self._top, ancestors, edit))
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self._stack.pop()

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        if attribute == "body" and isinstance(node, cst.FunctionDef | cst.ClassDef):
            is_function = isinstance(node, cst.FunctionDef)
            self._scopes.append((node.name.value, is_function))
            self._functions += is_function
        elif attribute == "test" and isinstance(node, cst.If | cst.While):
            self._conditions += 1

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        if attribute == "body" and isinstance(original_node, cst.FunctionDef | cst.ClassDef):
            _, is_function = self._scopes.pop()
            self._functions -= is_function
        elif attribute == "test" and isinstance(original_node, cst.If | cst.While):
            self._conditions -= 1


def collect(module: cst.Module, operators: tuple[Operator, ...]) -> list[Site]:
    """Every site in ``module``'s function bodies, in source order (pre-order within a statement)."""
    sites: list[Site] = []
    for top, stmt in enumerate(module.body):
        stmt.visit(_Collector(operators, top, sites))
    return sites
