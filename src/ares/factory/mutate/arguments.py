"""swap_arguments: two adjacent positional arguments of a call trade places (commas and spacing stay)."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from .nodes import code
from .operator import Context, Edit, Operator

# Order-free builtins: swapping their arguments is no bug.
_SYMMETRIC = frozenset({"max", "min"})


class SwapArguments(Operator):
    strategy = "swap_arguments"
    node_types = (cst.Call,)

    def edits(self, node: cst.CSTNode, ctx: Context) -> Iterator[Edit]:
        assert isinstance(node, cst.Call)
        if isinstance(node.func, cst.Name) and node.func.value in _SYMMETRIC:
            return
        args = list(node.args)
        for i in range(len(args) - 1):
            a, b = args[i], args[i + 1]
            if a.keyword or b.keyword or a.star or b.star:
                continue
            if code(a.value) == code(b.value):
                continue
            swapped = list(args)
            swapped[i] = a.with_changes(value=b.value)
            swapped[i + 1] = b.with_changes(value=a.value)
            yield Edit(
                node,
                node.with_changes(args=swapped),
                node,
                f"swap positional arguments {i + 1} and {i + 2} of a call",
            )
