"""swap_arithmetic: ``+`` <-> ``-``, ``*`` <-> ``/``, ``//`` -> ``/``, shifts and ``&``/``|``, also in ``+=``.

``%`` is left alone (it is string formatting as often as modulo), and so are operations on string or
sequence literals (``"a" + b``, ``[x] * n``), where the swap is a type error rather than a bug.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from .nodes import SEQUENCE_LITERALS, swap_token, token
from .operator import Context, Edit, Operator

_BINARY: dict[type[cst.CSTNode], type[cst.CSTNode]] = {
    cst.Add: cst.Subtract,
    cst.Subtract: cst.Add,
    cst.Multiply: cst.Divide,
    cst.Divide: cst.Multiply,
    cst.FloorDivide: cst.Divide,
    cst.LeftShift: cst.RightShift,
    cst.RightShift: cst.LeftShift,
    cst.BitAnd: cst.BitOr,
    cst.BitOr: cst.BitAnd,
}
_AUGMENTED: dict[type[cst.CSTNode], type[cst.CSTNode]] = {
    cst.AddAssign: cst.SubtractAssign,
    cst.SubtractAssign: cst.AddAssign,
    cst.MultiplyAssign: cst.DivideAssign,
    cst.DivideAssign: cst.MultiplyAssign,
    cst.FloorDivideAssign: cst.DivideAssign,
    cst.LeftShiftAssign: cst.RightShiftAssign,
    cst.RightShiftAssign: cst.LeftShiftAssign,
    cst.BitAndAssign: cst.BitOrAssign,
    cst.BitOrAssign: cst.BitAndAssign,
}


class SwapArithmetic(Operator):
    strategy = "swap_arithmetic"
    node_types = (cst.BinaryOperation, cst.AugAssign)

    def edits(self, node: cst.CSTNode, ctx: Context) -> Iterator[Edit]:
        if isinstance(node, cst.BinaryOperation):
            new_type = _BINARY.get(type(node.operator))
            operands = (node.left, node.right)
        else:
            assert isinstance(node, cst.AugAssign)
            new_type = _AUGMENTED.get(type(node.operator))
            operands = (node.value,)
        if new_type is None or any(isinstance(o, SEQUENCE_LITERALS) for o in operands):
            return
        new_op = swap_token(node.operator, new_type)
        yield Edit(
            node,
            node.with_changes(operator=new_op),
            node,
            f"swap arithmetic operator '{token(node.operator)}' to '{token(new_op)}'",
        )
