"""Statement bugs: remove a statement, remove an early return, swap two adjacent statements.

All three edit a block's statement list and keep comments where they were: a removed statement's
leading comment lines move to the statement after it, swapped statements keep the comment slots.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import libcst as cst

from .nodes import code, is_plain_statement, single_small
from .operator import Context, Edit, Operator


def _without(body: Sequence[cst.BaseStatement], index: int) -> list[cst.BaseStatement]:
    """``body`` minus statement ``index``, its leading comment lines handed to the next statement."""
    out = list(body)
    removed = out.pop(index)
    if index < len(out) and removed.leading_lines:
        following = out[index]
        out[index] = following.with_changes(leading_lines=[*removed.leading_lines, *following.leading_lines])
    return out


class RemoveStatement(Operator):
    """Drop one expression/assignment/del line that is not its block's last statement."""

    strategy = "remove_statement"
    node_types = (cst.IndentedBlock,)

    def edits(self, node: cst.CSTNode, ctx: Context) -> Iterator[Edit]:
        assert isinstance(node, cst.IndentedBlock)
        for i, stmt in enumerate(node.body[:-1]):
            if is_plain_statement(stmt):
                yield Edit(
                    node,
                    node.with_changes(body=_without(node.body, i)),
                    stmt,
                    f"remove statement '{code(single_small(stmt)).strip()[:60]}'",
                )


class RemoveReturn(Operator):
    """Drop an early ``return`` nested in an if/for/while/with/try block: control falls through.

    The function's own top-level returns are left alone (dropping those only makes it return None).
    A return that is its block's only statement becomes ``pass``.
    """

    strategy = "remove_return"
    node_types = (cst.IndentedBlock, cst.SimpleStatementSuite)

    def edits(self, node: cst.CSTNode, ctx: Context) -> Iterator[Edit]:
        if isinstance(ctx.ancestor(), cst.FunctionDef):
            return
        if isinstance(node, cst.SimpleStatementSuite):
            if len(node.body) == 1 and isinstance(node.body[0], cst.Return):
                replacement = node.with_changes(body=[cst.Pass()])
                yield Edit(node, replacement, node, "replace an early return by pass")
            return
        assert isinstance(node, cst.IndentedBlock)
        for i, stmt in enumerate(node.body):
            small = single_small(stmt)
            if not isinstance(small, cst.Return):
                continue
            if len(node.body) == 1:
                body = [stmt.with_changes(body=[cst.Pass()])]
                description = "replace an early return by pass"
            else:
                body = _without(node.body, i)
                description = "remove an early return"
            yield Edit(node, node.with_changes(body=body), stmt, description)


class _Names(cst.CSTVisitor):
    """The names a statement mentions, the names it assigns, and whether it may have side effects."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.side_effects = False

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)

    def visit_Call(self, node: cst.Call) -> None:
        self.side_effects = True

    def visit_Await(self, node: cst.Await) -> None:
        self.side_effects = True

    def visit_Del(self, node: cst.Del) -> None:
        self.side_effects = True


def _assigned(small: cst.BaseSmallStatement) -> tuple[set[str], bool]:
    """Plain names a statement assigns, and whether it assigns anything else (attribute, item)."""
    if isinstance(small, cst.Assign):
        targets = [t.target for t in small.targets]
    elif isinstance(small, cst.AugAssign | cst.AnnAssign):
        targets = [small.target]
    else:
        return set(), False
    names: set[str] = set()
    other = False
    while targets:
        target = targets.pop()
        if isinstance(target, cst.Name):
            names.add(target.value)
        elif isinstance(target, cst.Tuple | cst.List):
            targets.extend(e.value for e in target.elements)
        elif isinstance(target, cst.StarredElement):
            targets.append(target.value)
        else:
            other = True
    return names, other


def _independent(a: cst.BaseSmallStatement, b: cst.BaseSmallStatement) -> bool:
    """True when swapping cannot change behaviour: no calls, no attribute/item writes, no shared names."""
    facts = []
    for small in (a, b):
        names = _Names()
        small.visit(names)
        assigned, other = _assigned(small)
        facts.append((names.names, assigned, names.side_effects or other))
    (names_a, assigned_a, effects_a), (names_b, assigned_b, effects_b) = facts
    if effects_a or effects_b:
        return False
    return not (assigned_a & names_b or assigned_b & names_a)


class Shuffle(Operator):
    """Swap two adjacent expression/assignment lines, when the swap can change behaviour.

    Pairs that provably commute (no calls, no attribute or item writes, neither reads what the other
    assigns) are skipped: their swap is an equivalent program, not a bug.
    """

    strategy = "shuffle"
    node_types = (cst.IndentedBlock,)

    def edits(self, node: cst.CSTNode, ctx: Context) -> Iterator[Edit]:
        assert isinstance(node, cst.IndentedBlock)
        body = node.body
        for i in range(len(body) - 1):
            first, second = body[i], body[i + 1]
            if not (is_plain_statement(first) and is_plain_statement(second)):
                continue
            small_a, small_b = single_small(first), single_small(second)
            assert small_a is not None and small_b is not None
            if code(small_a) == code(small_b) or _independent(small_a, small_b):
                continue
            swapped = list(body)
            swapped[i] = second.with_changes(leading_lines=first.leading_lines)
            swapped[i + 1] = first.with_changes(leading_lines=second.leading_lines)
            yield Edit(node, node.with_changes(body=swapped), first, "swap two adjacent statements")
