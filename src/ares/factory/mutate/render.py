"""Turn a site into the whole mutated file, re-rendering only the innermost statement that changed.

One full render of the module records where every statement's text starts and ends and the
indentation it is rendered at; a candidate then re-renders just its innermost enclosing statement
at that indentation and splices it in: linear in the file, not a full-tree render per candidate.

The span recording uses libcst's code generation state (``libcst._nodes.internal``), which is not
public API, so each span is checked once: the original statement, re-rendered the same way, must
reproduce its text exactly, else the whole module is rendered (slower, always right).
"""

from __future__ import annotations

import dataclasses

import libcst as cst
from libcst._nodes.internal import CodegenState

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


@dataclasses.dataclass(frozen=True)
class _Span:
    start: int
    end: int
    indent: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Rendered:
    """The mutated file, and the mutated top-level statement's text (compiling it checks the syntax)."""

    after: str
    statement: str


class _SpanRecorder(CodegenState):
    """A code generation state that notes each statement's character span and indentation."""

    def __init__(self, module: cst.Module) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.length = 0
        self.spans: dict[cst.CSTNode, _Span] = {}
        self._open: list[tuple[int, tuple[str, ...]]] = []

    def add_token(self, value: str) -> None:
        super().add_token(value)
        self.length += len(value)

    def add_indent_tokens(self) -> None:
        super().add_indent_tokens()
        self.length += sum(len(token) for token in self.indent_tokens)

    def before_codegen(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.BaseStatement):
            self._open.append((self.length, tuple(self.indent_tokens)))

    def after_codegen(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.BaseStatement):
            start, indent = self._open.pop()
            self.spans[node] = _Span(start, self.length, indent)


class ModuleText:
    """A parsed module plus each statement's span in its source, for splicing."""

    def __init__(self, source: str, module: cst.Module) -> None:
        self.source = source
        self.module = module
        recorder = _SpanRecorder(module)
        module._codegen(recorder)
        self._spans = recorder.spans
        self._checked: dict[cst.CSTNode, bool] = {}

    def _render_at(self, node: cst.CSTNode, indent: tuple[str, ...]) -> str:
        state = CodegenState(
            default_indent=self.module.default_indent,
            default_newline=self.module.default_newline,
            indent_tokens=list(indent),
        )
        node._codegen(state)
        return "".join(state.tokens)

    def _splices(self, stmt: cst.CSTNode) -> bool:
        """Whether re-rendering ``stmt`` alone reproduces its text (checked once per statement)."""
        if stmt not in self._checked:
            span = self._spans.get(stmt)
            self._checked[stmt] = span is not None and (
                self.source[span.start : span.end] == self._render_at(stmt, span.indent)
            )
        return self._checked[stmt]

    def render(self, site: Site) -> Rendered:
        chain = (*site.ancestors, site.edit.target)
        # The innermost statement holding the edit (the top-level statement at the latest).
        inner = max(i for i, node in enumerate(chain) if isinstance(node, cst.BaseStatement) or i == 0)
        node, new = site.edit.target, site.edit.replacement
        for parent in reversed(chain[:-1]):
            if node is chain[inner]:
                break
            new = _replace_child(parent, node, new)
            node = parent
        top = self._spans.get(chain[0])
        if top is not None and self._splices(node) and self._splices(chain[0]):
            span = self._spans[node]
            text = self._render_at(new, span.indent)
            after = self.source[: span.start] + text + self.source[span.end :]
            statement = after[top.start : top.end + len(after) - len(self.source)]
            return Rendered(after, statement)
        for parent in reversed(chain[:inner]):
            new = _replace_child(parent, node, new)
            node = parent
        body = list(self.module.body)
        body[site.top] = new
        after = self.module.with_changes(body=body).code
        return Rendered(after, after)
