"""Condition bugs: invert an ``if`` test, drop one clause of an ``and``/``or`` test, swap if/else bodies."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from .nodes import code, parenthesize
from .operator import Context, Edit, Operator

# ``not`` binds tighter than and/or (``not (a and b)``); ``not (a in b)`` reads better than ``not a in b``.
_NEEDS_PARENS = (cst.BooleanOperation, cst.Comparison, cst.IfExp, cst.Lambda, cst.NamedExpr)


class InvertCondition(Operator):
    """``if c:`` -> ``if not c:`` (and ``if not c:`` -> ``if c:``), also on ``elif``."""

    strategy = "invert_condition"
    node_types = (cst.If,)

    def edits(self, node: cst.CSTNode, ctx: Context) -> Iterator[Edit]:
        assert isinstance(node, cst.If)
        test = node.test
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not) and not test.lpar:
            inverted = test.expression
            description = "invert condition: drop 'not'"
        else:
            operand = parenthesize(test) if isinstance(test, _NEEDS_PARENS) else test
            inverted = cst.UnaryOperation(
                operator=cst.Not(whitespace_after=cst.SimpleWhitespace(" ")),
                expression=operand,
            )
            description = "invert condition: add 'not'"
        whitespace = node.whitespace_before_test
        if not code(whitespace):
            whitespace = cst.SimpleWhitespace(" ")  # "if(x):" -> "if not (x):"
        replacement = node.with_changes(test=inverted, whitespace_before_test=whitespace)
        yield Edit(node, replacement, node, description)


class DropCondition(Operator):
    """``if a and b:`` -> ``if a:`` (or ``if b:``): one clause of a compound if/while test dropped."""

    strategy = "drop_condition"
    node_types = (cst.BooleanOperation,)

    def edits(self, node: cst.CSTNode, ctx: Context) -> Iterator[Edit]:
        assert isinstance(node, cst.BooleanOperation)
        if not ctx.in_condition:
            return
        word = "and" if isinstance(node.operator, cst.And) else "or"
        options = [node.left]
        # ``a and b and c`` is ``(a and b) and c``: the left side is dropped only at the innermost
        # level (or when parenthesized), so each edit drops exactly one clause.
        left = node.left
        chained = isinstance(left, cst.BooleanOperation) and type(left.operator) is type(node.operator)
        if not chained or left.lpar:
            options.append(node.right)
        for kept in options:
            replacement = kept.with_changes(lpar=[*node.lpar, *kept.lpar], rpar=[*kept.rpar, *node.rpar])
            yield Edit(node, replacement, node, f"drop one clause of an '{word}' condition")


class SwapIfElse(Operator):
    """``if c: A else: B`` -> ``if c: B else: A`` (the blocks' header comments stay on their lines)."""

    strategy = "swap_if_else"
    node_types = (cst.If,)

    def edits(self, node: cst.CSTNode, ctx: Context) -> Iterator[Edit]:
        assert isinstance(node, cst.If)
        orelse = node.orelse
        if not isinstance(orelse, cst.Else) or type(node.body) is not type(orelse.body):
            return
        if code(node.body) == code(orelse.body):
            return
        body = node.body.with_changes(body=orelse.body.body)
        other = orelse.body.with_changes(body=node.body.body)
        yield Edit(
            node,
            node.with_changes(body=body, orelse=orelse.with_changes(body=other)),
            node,
            "swap the bodies of if and else",
        )
