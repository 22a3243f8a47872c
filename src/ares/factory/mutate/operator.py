"""The operator seam: an operator looks at one node in a function body and proposes minimal edits.

Every edit replaces the visited node (``target``) by a copy with one change, so a candidate is one
small, formatting-preserving diff; ``anchor`` is the node whose line the mutation reports.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import ClassVar

import libcst as cst


@dataclass(frozen=True)
class Edit:
    """Replace ``target`` (the visited node) by ``replacement``; ``anchor`` gives the reported line."""

    target: cst.CSTNode
    replacement: cst.CSTNode
    anchor: cst.CSTNode
    description: str


@dataclass(frozen=True)
class Context:
    """Where the visited node sits: its ancestors (outermost first) and whether it is in an if/while test."""

    parents: Sequence[cst.CSTNode]
    in_condition: bool

    def ancestor(self, level: int = 1) -> cst.CSTNode | None:
        """The parent (level 1), grandparent (2), ... or None above the top-level statement."""
        return self.parents[-level] if len(self.parents) >= level else None


class Operator:
    """A mutation strategy: ``edits`` yields every minimal change it can make to one node."""

    strategy: ClassVar[str]
    node_types: ClassVar[tuple[type[cst.CSTNode], ...]]

    def edits(self, node: cst.CSTNode, ctx: Context) -> Iterator[Edit]:
        raise NotImplementedError
