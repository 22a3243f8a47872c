"""The import graph of the ``ares`` package: floors, and no cycle anywhere.

The graph is built from the source with ``ast``: every ``import`` and ``from … import`` statement,
at module level or inside a function, with relative imports resolved. ``from pkg import name``
points at ``pkg.name`` when that is a module, else at ``pkg``. Imports under ``if TYPE_CHECKING:``
never run, but they are part of the design too: the floor and cycle checks count them. The floors
(lowest first) are the list in README.md's Layout section; a module imports only from lower floors.
Run as a script to print every strongly connected component and every import that goes up.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
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


def readme_floors(readme: Path = ROOT / "README.md") -> list[list[str]]:
    """The floors of the README's Layout section: the text block after ``<!-- floors: … -->``, one
    floor per line, packages separated by commas."""
    text = readme.read_text()
    found = re.search(r"<!-- floors:[^>]*-->\s*```text\n(?P<body>.*?)```", text, re.S)
    assert found, "README.md has no <!-- floors --> block"
    return [[name.strip() for name in line.split(",")] for line in found["body"].splitlines() if line.strip()]


def _package(module: str) -> str:
    """``ares.tasks.swe.load`` -> ``tasks``; the root package itself -> ``ares``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "ares"


def upward_imports(graph: dict[str, set[str]], floors: list[list[str]]) -> list[str]:
    """Every import from a package to one on its own floor or above (the root package excepted)."""
    floor = {name: level for level, names in enumerate(floors) for name in names}
    bad = []
    for module, targets in sorted(graph.items()):
        source = _package(module)
        if source == "ares":
            continue
        for target in sorted(targets):
            other = _package(target)
            if other != source and floor.get(other, -1) >= floor.get(source, -1):
                where = f"{source} on floor {floor.get(source)}, {other} on {floor.get(other)}"
                bad.append(f"{module} -> {target} ({where})")
    return bad


def test_every_package_stands_on_one_floor() -> None:
    floors = readme_floors()
    named = [name for names in floors for name in names]
    assert len(named) == len(set(named)), f"a package on two floors: {named}"
    packages = {_package(module) for module in import_graph()} - {"ares"}
    assert packages - set(named) == set(), "packages missing from README.md's floors"
    assert set(named) - packages == set(), "README.md's floors name packages that do not exist"


def test_packages_import_only_from_lower_floors_even_under_type_checking() -> None:
    bad = upward_imports(import_graph(typing=True), readme_floors())
    assert not bad, "imports that go up or sideways:\n" + "\n".join(bad)


def test_no_module_cycle_anywhere_even_through_typing_only_imports() -> None:
    graph = import_graph(typing=True)
    found = "\n".join(_describe(graph, comp) for comp in cycles(graph))
    assert not found, found


def test_the_floor_check_sees_an_upward_import() -> None:
    graph = {"ares.tasks.model": {"ares.envs.code_env"}, "ares.envs.code_env": {"ares.tasks.model"}}
    assert upward_imports(graph, [["tasks"], ["envs"]]) == [
        "ares.tasks.model -> ares.envs.code_env (tasks on floor 0, envs on 1)"
    ]
    assert upward_imports(graph, [["tasks", "envs"]]) != []  # one floor: no imports between them


def test_the_graph_sees_function_level_and_relative_imports() -> None:
    graph = import_graph()
    assert graph, "no ares modules found under src/"
    assert all(name.startswith("ares") for name in graph)


if __name__ == "__main__":
    g = import_graph(typing=True)
    comps = cycles(g)
    for comp in comps:
        print(_describe(g, comp), end="\n\n")
    up = upward_imports(g, readme_floors())
    print("\n".join(up))
    sys.exit(1 if comps or up else 0)
