"""The package's shape: no import circles, one door into the engine, every module says what it
owns.

Read from the source with ``ast`` (nothing is imported): an import inside a function counts,
since a lazy import is still a dependency; one under ``if TYPE_CHECKING:`` does not, since it
never runs.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = "pytest_verifygate"
SOURCE = Path(__file__).resolve().parents[1] / "src" / PACKAGE


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SOURCE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(path): path for path in sorted(SOURCE.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(node: ast.AST, module: str, is_package: bool) -> set[str]:
    """The package modules that ``node``'s code imports when it runs."""
    found: set[str] = set()
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for branch in child.orelse:
                found |= _imports(branch, module, is_package)
            continue
        if isinstance(child, ast.Import):
            found |= {alias.name for alias in child.names if alias.name in MODULES}
        elif isinstance(child, ast.ImportFrom):
            base = child.module or ""
            if child.level:
                anchor = module.split(".")
                anchor = anchor[: len(anchor) - child.level + (1 if is_package else 0)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in child.names:
                # ``from pkg import sub`` imports the submodule; ``from mod import name``
                # imports the module that defines the name.
                candidate = f"{base}.{alias.name}"
                found.add(candidate if candidate in MODULES else base)
        found |= _imports(child, module, is_package)
    return {name for name in found if name in MODULES and name != module}


def import_graph() -> dict[str, set[str]]:
    graph = {}
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        graph[name] = _imports(tree, name, path.name == "__init__.py")
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of two or more modules (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def test_the_package_has_no_import_circles() -> None:
    graph = import_graph()
    assert len(graph) > 30 and graph[f"{PACKAGE}.engine"], "the graph was not read"
    assert find_cycles(graph) == []


def test_the_cycle_finder_finds_a_circle() -> None:
    # The check above can fail: a circle planted in a graph is found.
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycles(graph) == [["a", "b", "c"]]


@pytest.mark.parametrize("name", sorted(MODULES))
def test_each_module_says_what_it_owns(name: str) -> None:
    path = MODULES[name]
    text = path.read_text(encoding="utf-8")
    assert ast.get_docstring(ast.parse(text)), f"{path} has no module docstring"


def test_front_ends_prepare_runs_only_through_the_engine() -> None:
    # One door: no front end loads a contract, computes changes, selects or plans gates, or
    # assembles a report itself; each calls engine.prepare / run / start / report.
    engine_steps = {"load_contract", "compute_changes", "select_gates", "plan_gates",
                    "build_report", "run_gates"}
    front_ends = [name for name in MODULES
                  if name.startswith((f"{PACKAGE}.cli", f"{PACKAGE}.agents",
                                      f"{PACKAGE}.pytest_plugin"))]
    assert len(front_ends) > 5
    for name in front_ends:
        tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                    for alias in node.names}
        assert not imported & engine_steps, f"{name} reaches past the engine"


@pytest.mark.slow
def test_every_module_imports() -> None:
    """An annotation naming a type imported only for the type checker fails at import time in
    a module without ``from __future__ import annotations``, and the type checker does not say."""
    names = sorted(name for name in MODULES if not name.endswith("__main__"))
    script = ("import importlib, sys\n"
              "for name in sys.argv[1:]:\n"
              "    try:\n"
              "        importlib.import_module(name)\n"
              "    except Exception as exc:\n"
              "        print(name, type(exc).__name__, exc)\n")
    done = subprocess.run([sys.executable, "-c", script, *names], capture_output=True,
                          text=True, timeout=120)
    assert (done.returncode, done.stdout) == (0, ""), done.stdout + done.stderr
