"""Turn a site into the whole mutated file, re-rendering only the top-level statement that changed.

A module's text is its header comments, each top-level statement's text, then its footer, so a
mutated file is the original text with one statement's span replaced: linear in the file, not a
full-tree transform per candidate.
"""

from __future__ import annotations

import dataclasses

import libcst as cst

from .collect import Site


def _replace_child(parent: cst.CSTNode, old: cst.CSTNode, new: cst.CSTNode) -> cst.CSTNode:
    """``parent`` with its child ``old`` (by identity) replaced by ``new``."""
    for field in dataclasses.fields(parent):
        value = getattr(parent, field.name)
        if value is old:
            return parent.with_changes(**{field.name: new})
        if isinstance(value, tuple | list) and any(item is old for item in value):
            return parent.with_changes(**{field.name: [new if item is old else item for item in value]})
    raise LookupError(f"{type(old).__name__} is not a child of {type(parent).__name__}")


class ModuleText:
    """A parsed module and where each top-level statement's text starts, for splicing."""

    def __init__(self, source: str, module: cst.Module) -> None:
        self.source = source
        self.module = module
        header = "".join(module.code_for_node(line) for line in module.header)
        parts = [module.code_for_node(stmt) for stmt in module.body]
        self._offsets = [len(header)]
        for part in parts:
            self._offsets.append(self._offsets[-1] + len(part))
        # The splice is exact when the text really is header + statements + footer (a file without a
        # final newline renders its last statement differently): otherwise render the whole module.
        self._splice = source.startswith(header) and source[len(header) : self._offsets[-1]] == "".join(parts)

    def render(self, site: Site) -> str:
        node, new = site.edit.target, site.edit.replacement
        for parent in reversed(site.ancestors):
            new = _replace_child(parent, node, new)
            node = parent
        if not self._splice:
            body = list(self.module.body)
            body[site.top] = new
            return self.module.with_changes(body=body).code
        start, end = self._offsets[site.top], self._offsets[site.top + 1]
        return self.source[:start] + self.module.code_for_node(new) + self.source[end:]
