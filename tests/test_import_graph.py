"""The import graph of the ``ares`` package has no cycles where the architecture forbids them.

The graph is built from the source with ``ast``: every ``import`` and ``from … import`` statement,
at module level or inside a function, with relative imports resolved. ``from pkg import name``
points at ``pkg.name`` when that is a module, else at ``pkg``. Imports under ``if TYPE_CHECKING:``
never run; they count only where asked (``typing=True``): ``ares.sandbox`` and ``ares.images`` have
none in a cycle either. Run as a script to print every strongly connected component of the whole package (with
typing-only imports).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
ACYCLIC = ("ares.sandbox", "ares.images")


def _module_names(src: Path) -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for path in sorted((src / "ares").rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        mods[".".join(parts)] = path
    return mods


def _imports(tree: ast.AST, typing: bool) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        elif not typing and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))
    return found


def import_graph(src: Path = SRC, *, typing: bool = False) -> dict[str, set[str]]:
    """Map each ``ares`` module to the ``ares`` modules it imports anywhere in its body (and under
    ``if TYPE_CHECKING:`` with ``typing``)."""
    mods = _module_names(src)
    graph: dict[str, set[str]] = {name: set() for name in mods}
    for name, path in mods.items():
        is_pkg = path.name == "__init__.py"
        package = name if is_pkg else name.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text(), str(path)), typing):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    origin = ".".join(base + ([node.module] if node.module else []))
                else:
                    origin = node.module or ""
                for alias in node.names:
                    sub = f"{origin}.{alias.name}"
                    targets.append(sub if sub in mods else origin)
            for target in targets:
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _describe(graph: dict[str, set[str]], comp: list[str]) -> str:
    members = set(comp)
    edges = [f"  {a} -> {b}" for a in comp for b in sorted(graph[a] & members)]
    return "\n".join([f"cycle among {', '.join(comp)}:", *edges])


def _inside(name: str, packages: tuple[str, ...] = ACYCLIC) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def _cycles_within(packages: tuple[str, ...], *, typing: bool) -> str:
    graph = import_graph(typing=typing)
    sub = {a: {b for b in bs if _inside(b, packages)} for a, bs in graph.items() if _inside(a, packages)}
    return "\n".join(_describe(sub, comp) for comp in cycles(sub))


def test_no_import_cycles_in_sandbox_and_images() -> None:
    found = _cycles_within(ACYCLIC, typing=False)
    assert not found, found


def test_no_cycles_in_sandbox_and_images_even_through_typing_only_imports() -> None:
    found = _cycles_within(ACYCLIC, typing=True)
    assert not found, found


def test_the_graph_sees_function_level_and_relative_imports() -> None:
    graph = import_graph()
    assert graph, "no ares modules found under src/"
    assert all(name.startswith("ares") for name in graph)


if __name__ == "__main__":
    g = import_graph(typing=True)
    comps = cycles(g)
    for comp in comps:
        print(_describe(g, comp), end="\n\n")
    sys.exit(1 if comps else 0)
