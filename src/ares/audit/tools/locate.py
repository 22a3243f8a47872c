"""Find the functions an exploit targets in the agent's tree, then stub them or plant code beside them.

Run in the sandbox as ``python3 locate.py SPEC`` (SPEC: JSON with workdir, functions, files, action
``stub`` or ``append``, and the ``body`` or ``code`` to write). Known files come first (created with
a stub definition when missing), else every non-test ``.py`` file under the workdir that defines one
of the functions; code to append that has no such file goes into the tree's packages (their
``__init__.py``, else its top-level modules), which every test importing the project runs. Prints
each file it changed. Stdlib only: it runs on whatever python3 the image has.
"""

import ast
import json
import os
import sys

MAX_FILES = 20
SKIP_DIRS = {".git", "__pycache__", "node_modules", ".tox", ".venv", "venv", "build", "dist"}


def is_test(rel):
    name = os.path.basename(rel)
    parts = rel.split(os.sep)
    return (
        name.startswith("test_")
        or name.endswith("_test.py")
        or name == "conftest.py"
        or any(p in ("tests", "test", "testing") for p in parts[:-1])
    )


def sources(workdir):
    for root, dirs, files in os.walk(workdir):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(root, name)
                if not is_test(os.path.relpath(path, workdir)):
                    yield path


def defined(path, functions):
    """The FunctionDef nodes of ``path`` named in ``functions`` (None when it does not parse)."""
    try:
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return None
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef)
    return [node for node in ast.walk(tree) if isinstance(node, kinds) and node.name in functions]


def packages(workdir):
    """Non-test ``__init__.py`` files, shallowest first; else the top-level non-test modules."""
    found = [p for p in sources(workdir) if os.path.basename(p) == "__init__.py"]
    if not found:
        found = [p for p in sources(workdir) if os.path.dirname(p) == workdir.rstrip(os.sep)]
    return sorted(found, key=lambda p: (p.count(os.sep), p))[:MAX_FILES]


def stub(path, nodes, body):
    with open(path, encoding="utf-8") as handle:
        lines = handle.read().splitlines(True)
    for node in sorted(nodes, key=lambda n: n.lineno, reverse=True):
        first = node.body[0]
        if (
            isinstance(first, ast.Expr)
            and isinstance(getattr(first, "value", None), ast.Constant)
            and len(node.body) > 1
        ):
            first = node.body[1]  # keep the docstring
        if first.lineno == node.lineno:
            continue  # a one-line def
        indent = lines[first.lineno - 1][: first.col_offset]
        lines[first.lineno - 1 : node.end_lineno] = [indent + body + "\n"]
    with open(path, "w", encoding="utf-8") as handle:
        handle.writelines(lines)


def main():
    spec = json.loads(sys.argv[1])
    workdir, functions = spec["workdir"], set(spec["functions"])
    chosen = []
    for rel in spec.get("files") or ():
        path = os.path.join(workdir, rel)
        if not os.path.exists(path):
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            with open(path, "w", encoding="utf-8") as handle:
                handle.writelines(f"def {name}(*args, **kwargs):\n    pass\n\n" for name in sorted(functions))
        chosen.append(path)
    if not chosen and functions:
        for path in sources(workdir):
            if defined(path, functions):
                chosen.append(path)
            if len(chosen) >= MAX_FILES:
                break
    if not chosen and spec["action"] == "append":
        chosen = packages(workdir)
    for path in chosen:
        if spec["action"] == "stub":
            nodes = defined(path, functions)
            if nodes:
                stub(path, nodes, spec["body"])
        else:
            with open(path, "a", encoding="utf-8") as handle:
                handle.write("\n" + spec["code"] + "\n")
        print("changed", os.path.relpath(path, workdir))


if __name__ == "__main__":
    main()
