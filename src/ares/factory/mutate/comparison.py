"""flip_comparison: one comparison operator turned into its nearest wrong sibling (``<`` -> ``<=``)."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from .nodes import swap_token, token
from .operator import Context, Edit, Operator

_FLIPS: dict[type[cst.CSTNode], type[cst.CSTNode]] = {
    cst.LessThan: cst.LessThanEqual,
    cst.LessThanEqual: cst.LessThan,
    cst.GreaterThan: cst.GreaterThanEqual,
    cst.GreaterThanEqual: cst.GreaterThan,
    cst.Equal: cst.NotEqual,
    cst.NotEqual: cst.Equal,
    cst.Is: cst.IsNot,
    cst.IsNot: cst.Is,
    cst.In: cst.NotIn,
    cst.NotIn: cst.In,
}


class FlipComparison(Operator):
    strategy = "flip_comparison"
    node_types = (cst.Comparison,)

    def edits(self, node: cst.CSTNode, ctx: Context) -> Iterator[Edit]:
        assert isinstance(node, cst.Comparison)
        for i, target in enumerate(node.comparisons):
            new_type = _FLIPS.get(type(target.operator))
            if new_type is None:
                continue
            new_op = swap_token(target.operator, new_type)
            comparisons = list(node.comparisons)
            comparisons[i] = target.with_changes(operator=new_op)
            yield Edit(
                node,
                node.with_changes(comparisons=comparisons),
                node,
                f"flip comparison '{token(target.operator)}' to '{token(new_op)}'",
            )
