"""flip_boolean: ``and`` <-> ``or``."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from .nodes import swap_token, token
from .operator import Context, Edit, Operator


class FlipBoolean(Operator):
    strategy = "flip_boolean"
    node_types = (cst.BooleanOperation,)

    def edits(self, node: cst.CSTNode, ctx: Context) -> Iterator[Edit]:
        assert isinstance(node, cst.BooleanOperation)
        new_op = swap_token(node.operator, cst.Or if isinstance(node.operator, cst.And) else cst.And)
        yield Edit(
            node,
            node.with_changes(operator=new_op),
            node,
            f"flip boolean operator '{token(node.operator)}' to '{token(new_op)}'",
        )
