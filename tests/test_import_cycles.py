"""No import circle inside pipesim: every module's imports (at the top or inside functions, but not those under
``if TYPE_CHECKING:``, which never run) form a graph without cycles, so no module needs a deferred import to
break one, and each concern can be read (and loaded) on its own."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "pipesim"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imported_names(tree: ast.AST, package: str) -> set[str]:
    """Every absolute module name an import statement in ``tree`` may load (``from a import b`` may be module
    ``a.b``), skipping ``if TYPE_CHECKING:`` bodies; relative imports are resolved against ``package``."""
    names: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return names


def import_graph() -> dict[str, set[str]]:
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = imported_names(ast.parse(path.read_text(), str(path)), package)
        graph[name] = {n for n in found if n in paths and n != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a path ``[a, b, ..., a]``, or None (depth-first search, colours white/grey/black)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state:
                cycle = dfs(nxt)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = dfs(node)
            if cycle:
                return cycle
    return None


def test_pipesim_has_no_import_cycle():
    graph = import_graph()
    assert len(graph) > 100  # the walk really saw the package
    assert "pipesim.api.simulation" in graph["pipesim.cli.commands.simulate"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " → ".join(cycle)


@pytest.mark.parametrize("source, expected", [
    ("import pipesim.a\n", {"pipesim.a"}),
    ("def f():\n    from pipesim.b import c\n", {"pipesim.b", "pipesim.b.c"}),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pipesim.d import e\n",
     {"typing", "typing.TYPE_CHECKING"}),
    ("from .x import y\n", {"pipesim.pkg.x", "pipesim.pkg.x.y"}),
])
def test_the_walk_sees_deferred_imports_and_skips_type_checking(source, expected):
    assert imported_names(ast.parse(source), "pipesim.pkg") == expected


def test_the_cycle_finder_finds_a_cycle_and_names_it():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
