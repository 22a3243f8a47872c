"""remove_handler: drop one ``except`` clause of several, or make a lone handler re-raise."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from .nodes import single_small
from .operator import Context, Edit, Operator


def _reraises(body: cst.BaseSuite) -> bool:
    stmts = body.body
    if isinstance(body, cst.IndentedBlock):
        return len(stmts) == 1 and isinstance(single_small(stmts[0]), cst.Raise)
    return len(stmts) == 1 and isinstance(stmts[0], cst.Raise)


class RemoveHandler(Operator):
    strategy = "remove_handler"
    node_types = (cst.Try,)

    def edits(self, node: cst.CSTNode, ctx: Context) -> Iterator[Edit]:
        assert isinstance(node, cst.Try)
        handlers = list(node.handlers)
        if len(handlers) >= 2:
            for i, handler in enumerate(handlers):
                yield Edit(
                    node,
                    node.with_changes(handlers=handlers[:i] + handlers[i + 1 :]),
                    handler,
                    "remove an exception handler",
                )
            return
        if len(handlers) != 1 or _reraises(handlers[0].body):
            return
        handler = handlers[0]
        body = handler.body
        if isinstance(body, cst.IndentedBlock):
            new_body = body.with_changes(body=[cst.SimpleStatementLine(body=[cst.Raise()])])
        else:
            new_body = body.with_changes(body=[cst.Raise()])
        yield Edit(
            node,
            node.with_changes(handlers=[handler.with_changes(body=new_body)]),
            handler,
            "make an exception handler re-raise",
        )
