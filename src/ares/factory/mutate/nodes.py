"""Small libcst helpers the operators share: rendering, operator tokens, parentheses, +/-1 shifts."""

from __future__ import annotations

import dataclasses
import re

import libcst as cst

_EMPTY = cst.Module(body=[])
_DECIMAL = re.compile(r"0|[1-9][0-9]*")
STRING_TYPES = (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)
SEQUENCE_LITERALS = (*STRING_TYPES, cst.List, cst.Tuple, cst.ListComp)
# Expressions that bind looser than binary +/-: "e - 1" needs "(e) - 1".
_LOOSE = (cst.BooleanOperation, cst.Comparison, cst.IfExp, cst.Lambda, cst.NamedExpr)
_LOOSE_BINARY = (cst.BitOr, cst.BitAnd, cst.BitXor, cst.LeftShift, cst.RightShift)


def code(node: cst.CSTNode) -> str:
    """The node's source text (as it renders on its own)."""
    return _EMPTY.code_for_node(node)


def token(op: cst.CSTNode) -> str:
    """An operator's spelling without its whitespace ("<=", "not in")."""
    return " ".join(code(op).split())


def swap_token(op: cst.CSTNode, new_type: type[cst.CSTNode]) -> cst.CSTNode:
    """``new_type`` with ``op``'s whitespace, so only the operator's spelling changes."""
    kwargs = {}
    for field in dataclasses.fields(new_type):
        if hasattr(op, field.name):
            kwargs[field.name] = getattr(op, field.name)
        elif field.name.startswith("whitespace"):
            kwargs[field.name] = cst.SimpleWhitespace(" ")
    return new_type(**kwargs)


def parenthesize(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``expr`` wrapped in parentheses unless it already has some."""
    if expr.lpar:
        return expr
    return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def binds_looser_than_additive(expr: cst.BaseExpression) -> bool:
    if expr.lpar:
        return False
    if isinstance(expr, _LOOSE):
        return True
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        return True
    return isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, _LOOSE_BINARY)


def decimal(node: cst.CSTNode) -> int | None:
    """The value of a plain decimal integer literal (no 0x, 0o, underscores), else None."""
    if isinstance(node, cst.Integer) and _DECIMAL.fullmatch(node.value):
        return int(node.value)
    return None


def signed_literal(expr: cst.BaseExpression) -> int | None:
    """The value of ``k`` or ``-k`` for a plain decimal ``k``, else None."""
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus) and not expr.lpar:
        value = decimal(expr.expression)
        return None if value is None else -value
    return decimal(expr)


def _literal(value: int, like: cst.BaseExpression) -> cst.BaseExpression:
    node: cst.BaseExpression = cst.Integer(str(abs(value)))
    if value < 0:
        node = cst.UnaryOperation(operator=cst.Minus(), expression=node)
    return node.with_changes(lpar=like.lpar, rpar=like.rpar)


def shift(expr: cst.BaseExpression, delta: int) -> cst.BaseExpression | None:
    """``expr`` moved by ``delta`` (+1/-1) as a reader would write it, or None when that is no bug.

    ``3`` becomes ``2``/``4``; ``-1`` becomes ``-2`` (never ``0``: a negative bound turning
    non-negative changes meaning wholesale); ``n + 1`` becomes ``n + 2`` or ``n``; anything else
    gets `` + 1``/`` - 1`` (parenthesized when it binds looser).
    """
    value = signed_literal(expr)
    if value is not None:
        moved = value + delta
        if (value >= 0) != (moved >= 0) or (value < 0 and moved == 0):
            return None
        return _literal(moved, expr)
    if (
        isinstance(expr, cst.BinaryOperation)
        and isinstance(expr.operator, cst.Add | cst.Subtract)
        and not expr.lpar
        and decimal(expr.right) is not None
    ):
        offset = decimal(expr.right) * (1 if isinstance(expr.operator, cst.Add) else -1) + delta
        if offset == 0:
            return expr.left
        new_op = cst.Add if offset > 0 else cst.Subtract
        return expr.with_changes(
            operator=swap_token(expr.operator, new_op), right=expr.right.with_changes(value=str(abs(offset)))
        )
    left = parenthesize(expr) if binds_looser_than_additive(expr) else expr
    space = cst.SimpleWhitespace(" ")
    op = (cst.Add if delta > 0 else cst.Subtract)(whitespace_before=space, whitespace_after=space)
    return cst.BinaryOperation(left=left, operator=op, right=cst.Integer(str(abs(delta))))


def single_small(stmt: cst.CSTNode) -> cst.BaseSmallStatement | None:
    """The only small statement of a one-statement line (``x = 1``), else None."""
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        return stmt.body[0]
    return None


def is_plain_statement(stmt: cst.CSTNode) -> bool:
    """An expression/assignment/del line that is not a docstring or a bare ``...``/string."""
    small = single_small(stmt)
    if isinstance(small, cst.Expr):
        return not isinstance(small.value, (*STRING_TYPES, cst.Ellipsis))
    if isinstance(small, cst.AnnAssign):
        return small.value is not None
    return isinstance(small, cst.Assign | cst.AugAssign | cst.Del)
