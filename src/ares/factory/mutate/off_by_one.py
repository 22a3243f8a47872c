"""off_by_one: a ``range`` bound, slice bound or index moved by one (``range(n)`` -> ``range(n - 1)``)."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from .nodes import code, shift, signed_literal
from .operator import Context, Edit, Operator

# Subscripted types (``list[int]``, ``Dict[K, V]`` in casts) are not indexing.
_GENERIC_BUILTINS = frozenset({"list", "dict", "set", "frozenset", "tuple", "type"})


def _is_type_subscript(value: cst.BaseExpression) -> bool:
    if isinstance(value, cst.Name):
        return value.value in _GENERIC_BUILTINS or value.value[:1].isupper()
    return isinstance(value, cst.Attribute) and value.attr.value[:1].isupper()


def _indexable(expr: cst.BaseExpression) -> bool:
    """An index worth moving: an integer literal, a variable, or ``variable +/- k``."""
    if signed_literal(expr) is not None:
        return True
    if isinstance(expr, cst.Name):
        return expr.value not in ("True", "False", "None") and not expr.value[:1].isupper()
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add | cst.Subtract):
        return isinstance(expr.left, cst.Name) and signed_literal(expr.right) is not None
    return False


def _moves(expr: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    for delta in (-1, 1):
        moved = shift(expr, delta)
        if moved is not None:
            yield moved


class OffByOne(Operator):
    strategy = "off_by_one"
    node_types = (cst.Call, cst.Index, cst.Slice)

    def edits(self, node: cst.CSTNode, ctx: Context) -> Iterator[Edit]:
        if isinstance(node, cst.Call):
            yield from self._range(node)
        elif isinstance(node, cst.Index):
            yield from self._index(node, ctx)
        else:
            assert isinstance(node, cst.Slice)
            for bound in ("lower", "upper"):
                value = getattr(node, bound)
                if value is None:
                    continue
                for moved in _moves(value):
                    yield Edit(
                        node,
                        node.with_changes(**{bound: moved}),
                        node,
                        f"off-by-one: slice {bound} bound {code(value)} to {code(moved)}",
                    )

    def _range(self, node: cst.Call) -> Iterator[Edit]:
        if not (isinstance(node.func, cst.Name) and node.func.value == "range"):
            return
        args = node.args
        if not 1 <= len(args) <= 3 or any(a.keyword or a.star for a in args):
            return
        positions = {0: "stop"} if len(args) == 1 else {0: "start", 1: "stop"}
        for position, name in positions.items():
            value = args[position].value
            for moved in _moves(value):
                new_args = list(args)
                new_args[position] = args[position].with_changes(value=moved)
                yield Edit(
                    node,
                    node.with_changes(args=new_args),
                    node,
                    f"off-by-one: range {name} {code(value)} to {code(moved)}",
                )

    def _index(self, node: cst.Index, ctx: Context) -> Iterator[Edit]:
        element, subscript = ctx.ancestor(1), ctx.ancestor(2)
        if not isinstance(subscript, cst.Subscript) or len(subscript.slice) != 1 or node.star:
            return
        if _is_type_subscript(subscript.value) or not _indexable(node.value):
            return
        for moved in _moves(node.value):
            yield Edit(
                node,
                node.with_changes(value=moved),
                element or node,
                f"off-by-one: index {code(node.value)} to {code(moved)}",
            )
