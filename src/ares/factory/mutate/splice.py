"""A policy's answer spliced into the file in place of one function, or the reason it is refused.

The answer must be exactly one function of the same name (in a fenced block or bare): no other
definitions, imports or statements, since a task's fix must touch that function only. The new node
replaces the old one in the file's syntax tree (libcst), so every other byte of the file is kept
and the new body takes the file's indentation; inside the function, the header and each body
statement the answer left unchanged (same syntax tree) keep their original text, so the diff shows
what the policy changed, not how it formats; the docstring is always the original (a bug is in the
code, and a model's own docstring may describe its bug). Comments the original does not have
are dropped (a model told not to may still write ``# bug here``), and an answer equal to the
original once docstrings, comments and formatting are ignored is refused: it is no bug.
"""

from __future__ import annotations

import ast
import difflib
import re
import textwrap

import libcst as cst

from .functions import Function, docstring_and_rest, walk
from .mutation import Mutation, changes, split_lines

_FENCE = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)


class Refused(ValueError):
    """An answer that cannot become a mutation; ``reason`` is a short tally key."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


def answer_code(answer: str) -> str:
    """The code of an answer: its first fenced block that defines a function, else the whole text."""
    blocks = _FENCE.findall(answer)
    code = next((b for b in blocks if re.search(r"^\s*(async\s+)?def\s", b, re.MULTILINE)), None)
    return textwrap.dedent(code if code is not None else answer).strip("\n") + "\n"


def _comments(node: cst.CSTNode) -> set[str]:
    found: set[str] = set()

    class _Finder(cst.CSTVisitor):
        def visit_Comment(self, comment: cst.Comment) -> None:
            found.add(comment.value.strip())

    node.visit(_Finder())
    return found


class _DropNewComments(cst.CSTTransformer):
    """Removes comments whose text is not among ``keep``."""

    def __init__(self, keep: set[str]) -> None:
        super().__init__()
        self.keep = keep

    def _new(self, comment: cst.Comment | None) -> bool:
        return comment is not None and comment.value.strip() not in self.keep

    def leave_EmptyLine(
        self, original_node: cst.EmptyLine, updated_node: cst.EmptyLine
    ) -> cst.EmptyLine | cst.RemovalSentinel:
        return cst.RemoveFromParent() if self._new(updated_node.comment) else updated_node

    def leave_TrailingWhitespace(
        self, original_node: cst.TrailingWhitespace, updated_node: cst.TrailingWhitespace
    ) -> cst.TrailingWhitespace:
        if self._new(updated_node.comment):
            return updated_node.with_changes(comment=None, whitespace=cst.SimpleWhitespace(""))
        return updated_node


def _normalized(code: str) -> str:
    """The function's AST without docstrings: equal for two spellings of the same code."""
    tree = ast.parse(code)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(getattr(first.value, "value", None), str):
                node.body = node.body[1:] or [ast.Pass()]
    return ast.dump(tree, include_attributes=False)


def _key(module: cst.Module, stmt: cst.BaseStatement) -> str:
    """A statement's identity for alignment: its syntax tree, whatever its formatting."""
    code = textwrap.dedent(module.code_for_node(stmt.with_changes(leading_lines=())))
    return ast.dump(ast.parse(code), include_attributes=False)


def _header(module: cst.Module, node: cst.FunctionDef) -> str:
    bare = node.with_changes(
        body=cst.IndentedBlock([cst.SimpleStatementLine([cst.Pass()])]), leading_lines=()
    )
    return ast.dump(ast.parse(module.code_for_node(bare)), include_attributes=False)


def _keep_unchanged(module: cst.Module, old: cst.FunctionDef, new: cst.FunctionDef) -> cst.FunctionDef:
    """``new`` with the original text wherever it equals ``old``: header, then body statements."""
    merged = old if _header(module, old) == _header(module, new) else new
    if not isinstance(old.body, cst.IndentedBlock) or not isinstance(new.body, cst.IndentedBlock):
        return merged.with_changes(body=new.body)
    # The original docstring, always: a bug is in the code, and a model's docstring may describe it.
    doc, _ = docstring_and_rest(old.body)
    before, after = list(old.body.body), [*doc, *docstring_and_rest(new.body)[1]]
    if not after:
        after = [cst.SimpleStatementLine([cst.Pass()])]
    matcher = difflib.SequenceMatcher(
        None, [_key(module, s) for s in before], [_key(module, s) for s in after], autojunk=False
    )
    body: list[cst.BaseStatement] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        body.extend(before[i1:i2] if tag == "equal" else after[j1:j2])
    return merged.with_changes(body=old.body.with_changes(body=body))


def _the_function(code: str, name: str) -> cst.FunctionDef:
    try:
        module = cst.parse_module(code)
        compile(code, "<answer>", "exec", dont_inherit=True)
    except (cst.ParserSyntaxError, SyntaxError, ValueError) as exc:
        raise Refused("unparseable", str(exc).splitlines()[0] if str(exc) else "") from None
    defs = [s for s in module.body if isinstance(s, cst.FunctionDef)]
    if not defs:
        raise Refused("no_function")
    if defs[0].name.value != name or len(defs) > 1:
        raise Refused("wrong_function", ", ".join(d.name.value for d in defs))
    if len(module.body) > 1:
        raise Refused("code_outside_function")
    return defs[0]


def splice(before: str, function: Function, answer: str, *, strategy: str, author: str) -> Mutation:
    """The mutation replacing ``function`` in ``before`` (its file) by the answer's; raises ``Refused``."""
    new = _the_function(answer_code(answer), function.name)
    module = cst.parse_module(before)
    old = next((node for qualname, node, _ in walk(module) if qualname == function.qualname), None)
    if old is None:
        raise Refused("function_gone", function.qualname)
    new = new.visit(_DropNewComments(_comments(old)))
    if not isinstance(new, cst.FunctionDef):  # a transformer may in principle replace the node
        raise Refused("no_function")
    if _normalized(module.code_for_node(new.with_changes(leading_lines=()))) == _normalized(function.source):
        raise Refused("identical")
    new = _keep_unchanged(module, old, new)
    after = module.deep_replace(old, new.with_changes(leading_lines=old.leading_lines))
    assert isinstance(after, cst.Module)
    text = after.code
    try:
        compile(text, function.path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:  # e.g. ``return`` placement only wrong in context
        raise Refused("unparseable", str(exc)) from None
    ops = changes(split_lines(before), split_lines(text))
    if not ops:
        raise Refused("identical")
    return Mutation(
        strategy=strategy,
        path=function.path,
        qualname=function.qualname,
        line=ops[0][1] + 1,
        description=f"{strategy} of {function.qualname} by {author}",
        before=before,
        after=text,
        author=author,
    )
