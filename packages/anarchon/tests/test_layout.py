"""The layout of the packages: no import cycle, public modules named, old paths kept, modules small.

Read from the source tree (an AST walk), so the tests need no server. The
checked-in lists are in ``tests/layout/``: change them with the layout, on
purpose.
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
LISTS = Path(__file__).resolve().parent / "layout"
PACKAGES = {
    "anarchon": ROOT / "packages/anarchon/src",
    "anarchon_sql": ROOT / "packages/anarchon-sql/src",
    "anarchon_redis": ROOT / "packages/anarchon-redis/src",
    "anarchon_nats": ROOT / "packages/anarchon-nats/src",
}
MAX_LINES = 700

DEPRECATED = {
    "anarchon.batching": "anarchon.backend.batching",
    "anarchon.fleet_types": "anarchon.fleet.types",
    "anarchon.lease_model": "anarchon.backend.lease_model",
    "anarchon.memory": "anarchon.backend.memory",
    "anarchon.registry": "anarchon.backend.registry",
    "anarchon.result_json": "anarchon.backend.result_json",
    "anarchon.results": "anarchon._scheduler.results",
    "anarchon.status": "anarchon.fleet.status",
    "anarchon.tasks": "anarchon._scheduler.tasks",
    "anarchon.testing.contract": "anarchon.testing.contracts.backend",
    "anarchon.testing.lease_contract": "anarchon.testing.contracts.lease",
    "anarchon.testing.lease_model_contract": "anarchon.testing.contracts.lease_model",
    "anarchon.testing.sync_contract": "anarchon.testing.contracts.sync",
    "anarchon.testing.fleet_contract": "anarchon.testing.contracts.fleet",
    "anarchon.testing.retry_contract": "anarchon.testing.contracts.retry",
    "anarchon.testing.job_retry_contract": "anarchon.testing.contracts.job_retry",
    "anarchon.testing.one_off_contract": "anarchon.testing.contracts.one_off",
    "anarchon.testing.faults": "anarchon.testing.scenarios.faults",
    "anarchon.testing.fault_report": "anarchon.testing.scenarios.fault_report",
    "anarchon.testing.fault_worker": "anarchon.testing.scenarios.fault_worker",
    "anarchon.testing.heal": "anarchon.testing.scenarios.heal",
    "anarchon.testing.stop_bound": "anarchon.testing.scenarios.stop_bound",
    "anarchon.testing.slow_link": "anarchon.testing.scenarios.slow_link",
    "anarchon.testing.clock_step": "anarchon.testing.scenarios.clock_step",
    "anarchon.testing.control_scenario": "anarchon.testing.scenarios.control",
    "anarchon.testing.one_off_fleet": "anarchon.testing.scenarios.one_off",
    "anarchon.testing.proxy": "anarchon.testing.scenarios.proxy",
    "anarchon.testing.fenced_effects": "anarchon.testing.scenarios.fenced_effects",
}
"""Old paths the docs show: each re-exports its names from the new path and warns."""


def _modules(package: str) -> Iterator[tuple[str, Path]]:
    src = PACKAGES[package]
    for path in sorted((src / package).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        yield ".".join(parts), path


ALL_MODULES = {name: path for package in PACKAGES for name, path in _modules(package)}
COMPILED = {
    f"{package}.{stub.stem}"
    for package, src in PACKAGES.items()
    for stub in (src / package).glob("*.pyi")
}
"""Compiled modules (their stubs): imported, but with no Python source to walk."""


def _is_private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split("."))


def _top_level_imports(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    """Imports run when the module is imported: not in functions, not under ``TYPE_CHECKING``."""
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop(0)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            test = ast.unparse(node.test)
            if test not in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
                pending.extend(node.body)
            pending.extend(node.orelse)
        elif isinstance(node, ast.Try):
            pending.extend([*node.body, *node.orelse, *node.finalbody])
            for handler in node.handlers:
                pending.extend(handler.body)


def _ancestors(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:n]) for n in range(1, len(parts))]


def _edges(module: str, path: Path) -> set[str]:
    """The modules of ours that importing ``module`` imports first, parent packages included."""
    is_package = path.name == "__init__.py"
    targets: set[str] = set()
    for node in _top_level_imports(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, base] if base else anchor)
            names = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in ALL_MODULES else base
                for alias in node.names
            ]
        for name in names:
            while name and name not in ALL_MODULES:
                name = name.rpartition(".")[0]
            if name:
                targets.add(name)
    mine = set(_ancestors(module))
    # Importing a.b.c runs a/__init__ and a/b/__init__ first: an edge, unless the importer
    # sits inside that package (its package is then initialised before it).
    return {t for target in targets for t in [target, *_ancestors(target)] if t not in mine} - {
        module
    }


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_in_any_package() -> None:
    """No module imports itself back through other modules' top-level imports.

    Imports inside functions are left out (they run later); the few left in
    the code avoid optional dependencies or start-up cost and say so.
    """
    graph = {module: _edges(module, path) for module, path in ALL_MODULES.items()}
    assert _cycles(graph) == []


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    pending = [start]
    while pending:
        node = pending.pop()
        for nxt in graph.get(node, ()):
            if nxt not in seen:
                seen.add(nxt)
                pending.append(nxt)
    return seen


def test_no_module_imports_a_name_from_its_own_package() -> None:
    """``from <own package> import name`` fails when that package's ``__init__`` imports the module.

    The package is then still initialising and may not define ``name`` yet
    (a worker script that the package never imports may do it).
    """
    graph = {module: _edges(module, path) for module, path in ALL_MODULES.items()}
    wrong = []
    for module, path in ALL_MODULES.items():
        own = set(_ancestors(module))
        for node in _top_level_imports(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or node.level or node.module not in own:
                continue
            names = [
                a.name
                for a in node.names
                if f"{node.module}.{a.name}" not in {*ALL_MODULES, *COMPILED}
            ]
            if names and module in _reachable(graph, node.module):
                wrong.append(f"{module}: from {node.module} import {', '.join(names)}")
    assert wrong == []


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_every_module_imports(package: str) -> None:
    """Each module imports on its own in a fresh interpreter (no cycle hidden by import order)."""
    names = [m for m, _p in _modules(package) if not m.endswith("__main__")]
    script = (
        "import importlib, sys, warnings\n"
        "warnings.simplefilter('ignore', DeprecationWarning)\n"
        "failed = []\n"
        f"for name in {names!r}:\n"
        "    for loaded in [m for m in sys.modules if m.split('.')[0] == name.split('.')[0]]:\n"
        "        del sys.modules[loaded]\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception as error:\n"
        "        failed.append(f'{name}: {type(error).__name__}: {error}')\n"
        "print('\\n'.join(failed))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=240, check=True
    )
    assert done.stdout.strip() == ""


def test_public_modules_of_the_core_are_the_listed_ones() -> None:
    """The public modules of ``anarchon`` (no ``_`` in the path) are those in the checked-in list."""
    listed = (LISTS / "public_modules.txt").read_text().split()
    public = sorted(m for m, _p in _modules("anarchon") if not _is_private(m))
    assert public == sorted(listed)


_IMPORT = re.compile(
    r"^\s*(?:>>>\s*|\.\.\.\s*)?(?:from\s+(anarchon[\w.]*)\s+import\s+([\w, ()*]+)|import\s+(anarchon[\w.]*))",
    re.M,
)


def _shown_to_users() -> Iterator[Path]:
    yield ROOT / "README.md"
    yield from sorted((ROOT / "docs").rglob("*.md"))
    yield from sorted(p for p in (ROOT / "examples").rglob("*") if p.suffix in (".py", ".md"))


def test_docs_readme_and_examples_import_no_private_module() -> None:
    """What users copy names only public modules (no path component starting with ``_``)."""
    wrong = []
    for path in _shown_to_users():
        for match in _IMPORT.finditer(path.read_text()):
            module = match.group(1) or match.group(3)
            names = [n.strip(" ()") for n in (match.group(2) or "").split(",")]
            imported = [module, *(f"{module}.{n}" for n in names if f"{module}.{n}" in ALL_MODULES)]
            if any(_is_private(m) for m in imported):
                wrong.append(f"{path.relative_to(ROOT)}: {match.group(0).strip()}")
    assert wrong == []


@pytest.mark.parametrize("old", sorted(DEPRECATED))
def test_a_documented_old_path_still_imports_and_warns(old: str) -> None:
    """The stub warns ``DeprecationWarning`` and gives the very objects of the new path."""
    new = importlib.import_module(DEPRECATED[old])
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=re.escape(old)):
        stub = importlib.import_module(old)
    names = getattr(stub, "__all__", None) or new.__all__
    assert names
    for name in names:
        assert getattr(stub, name) is getattr(new, name), name


@pytest.mark.parametrize(
    "part",
    [
        "core",
        "testing",
    ],
)
def test_the_new_paths_do_not_warn(part: str) -> None:
    """Importing every non-stub module of the core warns nothing (no stub on the way)."""
    stubs = set(DEPRECATED)
    names = [
        m
        for m, _p in _modules("anarchon")
        if m not in stubs
        and not m.endswith("__main__")
        and m.startswith("anarchon.testing") == (part == "testing")
    ]
    script = "import importlib\n" + "".join(f"importlib.import_module({n!r})\n" for n in names)
    done = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-c", script],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_public_api_is_unchanged() -> None:
    import anarchon

    assert sorted(anarchon.__all__) == (LISTS / "anarchon_all.txt").read_text().split()
    for name in anarchon.__all__:
        assert hasattr(anarchon, name), name


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_no_module_is_over_700_lines(package: str) -> None:
    """Every hand-written module of each package is under 700 lines.

    Covers all four packages: until the backend packages' splits are merged,
    their cases fail on a branch that has only the core's split.
    """
    long = {
        module: lines
        for module, path in _modules(package)
        if (lines := len(path.read_text().splitlines())) >= MAX_LINES
        and "do not edit" not in path.read_text()[:500].lower()
    }
    assert long == {}
