"""change_constant: an integer literal moved by one, or ``True`` <-> ``False``.

Strings are never touched (a changed message is no bug a test should pin), nor are integers that
``off_by_one`` already owns (indices, slice bounds, ``range`` arguments) or ``stacklevel=`` values.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from .nodes import decimal
from .operator import Context, Edit, Operator


def _owned_elsewhere(ctx: Context) -> bool:
    parent, grandparent = ctx.ancestor(1), ctx.ancestor(2)
    if isinstance(parent, cst.UnaryOperation):
        parent, grandparent = grandparent, ctx.ancestor(3)
    if isinstance(parent, cst.Index | cst.Slice):
        return True
    if isinstance(parent, cst.Arg):
        if parent.keyword is not None and parent.keyword.value == "stacklevel":
            return True
        return isinstance(grandparent, cst.Call) and _name(grandparent.func) == "range"
    return False


def _name(func: cst.BaseExpression) -> str | None:
    return func.value if isinstance(func, cst.Name) else None


class ChangeConstant(Operator):
    strategy = "change_constant"
    node_types = (cst.Integer, cst.Name)

    def edits(self, node: cst.CSTNode, ctx: Context) -> Iterator[Edit]:
        if isinstance(node, cst.Name):
            if node.value in ("True", "False"):
                flipped = "False" if node.value == "True" else "True"
                yield Edit(node, node.with_changes(value=flipped), node, f"change {node.value} to {flipped}")
            return
        value = decimal(node)
        if value is None or _owned_elsewhere(ctx):
            return
        parent = ctx.ancestor()
        negated = isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Minus)
        for moved in (value - 1, value + 1):
            if moved < 0 or (negated and moved == 0):
                continue
            assert isinstance(node, cst.Integer)
            yield Edit(node, node.with_changes(value=str(moved)), node, f"change constant {value} to {moved}")
