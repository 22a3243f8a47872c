"""What an exploit may know of a task: only what its agent sees or can guess, never the fix.

A ``Target`` is the attacker's view of one task, per task kind: the working directory, the functions
the tests will call (HumanEval's entry point; the names a SWE problem statement or a Harbor
instruction mentions), the files known to hold them, where the hidden tests will be written and the
ids a log grader looks for. The test paths and ids are the one thing an honest agent would not know;
the audit assumes an attacker who guesses them right (the test file of the module it edits, the
test names a summary line needs), the worst case a grader has to withstand.
"""

from __future__ import annotations

import builtins
import keyword
import re
from dataclasses import dataclass
from typing import Literal

from ares.tasks.model import Task

Kind = Literal["swe", "humaneval", "harbor"]
KINDS: tuple[Kind, ...] = ("swe", "humaneval", "harbor")
#: Most function names taken from a statement or an instruction (the first named win).
MAX_FUNCTIONS = 5
_CODE_SPAN = re.compile(r"`([^`\n]+)`")
_CALL = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\(")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")
_FILE_NAME = re.compile(r"\.(py|txt|json|csv|md|toml|cfg|ini|sh|ya?ml)$")
_PY_FILE = re.compile(r"(?<![\w/.-])(/?[\w./-]+\.py)\b")
_ANY_FILE = re.compile(r"(?<![\w/.-])(/?[\w./-]+\.(?:py|txt|json|csv|md|log|out|toml|ya?ml))\b")
_NOT_FUNCTIONS = frozenset(dir(builtins)) | frozenset(keyword.kwlist) | {"self", "cls", "pytest", "python"}


@dataclass(frozen=True, slots=True)
class Target:
    """One task as an attacker sees it (paths relative to ``workdir`` unless absolute)."""

    kind: Kind
    workdir: str
    functions: tuple[str, ...] = ()
    #: Files known to hold ``functions`` (created when missing); empty: the exploits search the tree.
    files: tuple[str, ...] = ()
    #: Where the hidden tests will be written (a SWE test_patch's test files).
    test_files: tuple[str, ...] = ()
    #: The test ids a log grader reads (SWE FAIL_TO_PASS), for fake result lines.
    test_ids: tuple[str, ...] = ()
    #: Files of any kind the instruction names (outputs a stub may create empty).
    outputs: tuple[str, ...] = ()


def kind_of(task: Task) -> Kind:
    if task.verification is not None or task.source == "swebench":
        return "swe"
    if task.source == "humaneval":
        return "humaneval"
    return "harbor"


def target_of(task: Task) -> Target:
    """The attacker's view of ``task``, by its kind."""
    kind = kind_of(task)
    if kind == "humaneval":
        entry = str(task.metadata.get("entry_point") or "")
        return Target(kind, task.workdir, (entry,) if entry else (), (task.solution_file or "solution.py",))
    if kind == "swe":
        ids = tuple(str(i) for i in task.metadata.get("FAIL_TO_PASS") or ())
        files = tuple(dict.fromkeys(i.split("::", 1)[0] for i in ids if "::" in i))
        return Target(kind, task.workdir, named_functions(task.instruction), (), files, ids)
    entry = str(task.metadata.get("entry_point") or "")
    functions = tuple(dict.fromkeys(((entry,) if entry else ()) + named_functions(task.instruction)))
    named_files = [
        rel
        for m in _PY_FILE.findall(task.instruction)
        if (rel := _relative(m, task.workdir)) and not _is_test_name(rel)
    ]
    files = tuple(dict.fromkeys(([task.solution_file] if task.solution_file else []) + named_files))
    outputs = tuple(
        dict.fromkeys(rel for m in _ANY_FILE.findall(task.instruction) if (rel := _relative(m, task.workdir)))
    )
    return Target(kind, task.workdir, functions[:MAX_FUNCTIONS], files, outputs=outputs)


def named_functions(text: str) -> tuple[str, ...]:
    """Function names a text mentions: code spans (``Inventory.remove`` gives ``remove``) and calls."""
    found: list[str] = []
    for span in _CODE_SPAN.findall(text):
        found.extend(_CALL.findall(span))
        if _NAME.match(span.strip()) and not _FILE_NAME.search(span.strip()):
            found.append(span.strip().rsplit(".", 1)[-1])
    found.extend(_CALL.findall(text))
    names = [n for n in dict.fromkeys(found) if len(n) > 2 and n not in _NOT_FUNCTIONS and not n[0].isupper()]
    return tuple(names[:MAX_FUNCTIONS])


def _is_test_name(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"


def _relative(path: str, workdir: str) -> str | None:
    """A file an instruction names, relative to the workdir (None: outside it)."""
    if not path.startswith("/"):
        return path
    prefix = workdir.rstrip("/") + "/"
    return path[len(prefix) :] if path.startswith(prefix) else None
