"""The modules of ``anarchon_redis`` import each other without a cycle (checked from the source).

Every import counts, those under ``if TYPE_CHECKING:`` too: the graph is built
with ``ast`` from each module's source, and each module is then imported on
its own in a fresh interpreter.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import anarchon_redis

PACKAGE = "anarchon_redis"
ROOT = Path(anarchon_redis.__file__).parent


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(ROOT.glob("*.py")):
        name = PACKAGE if path.stem == "__init__" else f"{PACKAGE}.{path.stem}"
        found[name] = path
    return found


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules that ``name`` imports (absolute and relative imports)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = PACKAGE if node.level == 1 else ""
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            # ``from pkg import mod`` imports the module ``pkg.mod``; ``from mod import x``
            # imports ``mod``.
            submodules = [f"{module}.{alias.name}" for alias in node.names]
            targets = [t for t in submodules if t in known] or [module]
        for target in targets:
            if target in known and target != name:
                found.add(target)
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (as a path that ends where it starts), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_import_graph_has_no_cycle() -> None:
    modules = _modules()
    assert len(modules) >= 8, sorted(modules)
    graph = {name: _imports(name, path, set(modules)) for name, path in modules.items()}
    # The package's __init__ re-exports; the other modules must not import it.
    importers = sorted(n for n, deps in graph.items() if PACKAGE in deps)
    assert importers == [], f"modules importing the package itself: {importers}"
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_check_finds_a_cycle() -> None:
    """The checker itself: a known cycle is found, a chain is not."""
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_settings_classes_do_not_import_runtimes() -> None:
    modules = _modules()
    deps = _imports(f"{PACKAGE}.strategies", modules[f"{PACKAGE}.strategies"], set(modules))
    assert deps == set(), f"strategies imports {sorted(deps)}: settings hold settings only"


def test_each_module_imports_on_its_own() -> None:
    for name in _modules():
        done = subprocess.run(
            [sys.executable, "-c", f"import {name}"], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, f"import {name} failed:\n{done.stderr[-2000:]}"
