"""Code shape of ``plugins/``: file and class length, no import cycles, no imports inside functions.

Each check is a pure function over source text (``ast``), run on every Python file under
``plugins/`` and, to prove it can fail, on small synthetic sources.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PLUGINS = REPO / "plugins"
PACKAGE = "ansible_collections.vllm_fleet.recipes"
MAX_FILE_LINES = 500
MAX_CLASS_LINES = 250
#: Packages a file may import inside functions: _argv_checker.py runs inside an engine image and imports
#: that image's vLLM / vllm-router (absent on the controller, their layout differs per version), and the
#: image's pydantic, which validates vLLM's config fields the way vLLM does.
INNER_IMPORTS_ALLOWED = {"plugins/module_utils/_argv_checker.py": frozenset({"vllm", "vllm_router", "pydantic"}),
                         # optional on the controller: without it the benchmark says how to install it
                         "plugins/action/vllm_benchmark_report.py": frozenset({"matplotlib"})}


def python_sources() -> dict[str, str]:
    """``plugins/...py`` (relative to the repository) -> source text."""
    return {path.relative_to(REPO).as_posix(): path.read_text(encoding="utf-8")
            for path in sorted(PLUGINS.rglob("*.py"))}


def module_name(rel_path: str) -> str:
    """``plugins/a/b.py`` -> ``ansible_collections.vllm_fleet.recipes.plugins.a.b`` (``__init__`` dropped)."""
    parts = rel_path[:-len(".py")].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([PACKAGE, *parts])


def file_too_long(rel_path: str, source: str) -> list[str]:
    lines = len(source.splitlines())
    return [f"{rel_path}: {lines} lines (limit {MAX_FILE_LINES})"] if lines > MAX_FILE_LINES else []


def classes_too_long(rel_path: str, source: str) -> list[str]:
    problems = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            lines = node.end_lineno - node.lineno + 1
            if lines > MAX_CLASS_LINES:
                problems.append(f"{rel_path}: class {node.name} has {lines} lines (limit {MAX_CLASS_LINES})")
    return problems


def _functions(tree: ast.AST) -> Iterator[ast.AST]:
    return (node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)))


def _imported_roots(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Import):
        return {alias.name.split(".")[0] for alias in node.names}
    if isinstance(node, ast.ImportFrom):
        return {(node.module or "").split(".")[0]}
    return set()


def imports_inside_functions(rel_path: str, source: str, allowed: frozenset[str] = frozenset()) -> list[str]:
    """Import statements inside functions, except those of only ``allowed`` top-level packages."""
    return [f"{rel_path}:{node.lineno}: import inside function {func.name}() (imports belong at module level)"
            for func in _functions(ast.parse(source))
            for node in ast.walk(func) if _imported_roots(node) - allowed]


def own_imports(source: str, modules: frozenset[str]) -> set[str]:
    """The collection modules (of ``modules``) that ``source`` imports, at any depth of the tree."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module in modules:
                found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names
                         if f"{node.module}.{alias.name}" in modules)  # from package import module
    return found


def import_graph(sources: Mapping[str, str]) -> dict[str, set[str]]:
    """module -> the collection modules it imports (``sources``: relative path -> text)."""
    names = {module_name(rel): source for rel, source in sources.items()}
    modules = frozenset(names)
    return {name: own_imports(source, modules) - {name} for name, source in names.items()}


def import_cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of two or more modules (Tarjan), each sorted, as a cycle report."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
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
    return sorted(cycles)


SOURCES = python_sources()


def test_plugins_are_found():
    assert "plugins/action/vllm_plan.py" in SOURCES and "plugins/plugin_utils/_render.py" in SOURCES


def test_no_file_over_the_line_limit():
    problems = [p for rel, source in SOURCES.items() for p in file_too_long(rel, source)]
    assert not problems, "\n".join(problems)


def test_no_class_over_the_line_limit():
    problems = [p for rel, source in SOURCES.items() for p in classes_too_long(rel, source)]
    assert not problems, "\n".join(problems)


def test_no_import_cycle():
    cycles = import_cycles(import_graph(SOURCES))
    assert not cycles, "import cycles among the collection's modules:\n" + "\n".join(
        " <-> ".join(cycle) for cycle in cycles)


def test_no_import_inside_functions():
    problems = [p for rel, source in SOURCES.items() for p in imports_inside_functions(rel, source, INNER_IMPORTS_ALLOWED.get(rel, frozenset()))]
    assert not problems, "\n".join(problems)


# The checkers themselves, on synthetic sources: each one can fail.

LONG_CLASS = "class Big:\n" + "    x = 1\n" * MAX_CLASS_LINES
P = f"{PACKAGE}.plugins.plugin_utils"


@pytest.mark.parametrize("checker, source, expected", [
    (file_too_long, "x = 1\n" * 600, f"600 lines (limit {MAX_FILE_LINES})"),
    (file_too_long, "x = 1\n" * MAX_FILE_LINES, None),
    (classes_too_long, LONG_CLASS, f"class Big has {MAX_CLASS_LINES + 1} lines (limit {MAX_CLASS_LINES})"),
    (classes_too_long, "class Small:\n    x = 1\n", None),
    (imports_inside_functions, "def f():\n    import os\n    return os\n", "import inside function f()"),
    (imports_inside_functions, "class C:\n    def m(self):\n        from os import path\n",
     "import inside function m()"),
    (imports_inside_functions, "import os\n\n\ndef f():\n    return os\n", None),
    (lambda rel, src: imports_inside_functions(rel, src, frozenset({"vllm"})),
     "def f():\n    from vllm.config import X\n    import json\n", "import inside function f()"),
])
def test_checkers_flag_synthetic_sources(checker, source, expected):
    problems = checker("plugins/plugin_utils/_fake.py", source)
    if expected is None:
        assert problems == []
    else:
        assert len(problems) == 1 and expected in problems[0] and "_fake.py" in problems[0], problems


@pytest.mark.parametrize("sources, expected", [
    ({"plugins/plugin_utils/_a.py": f"from {P}._b import x\n",
      "plugins/plugin_utils/_b.py": f"from {P} import _a\n"},
     [[f"{P}._a", f"{P}._b"]]),
    ({"plugins/plugin_utils/_a.py": f"import {P}._b\n",
      "plugins/plugin_utils/_b.py": f"from {P}._c import y\n",
      "plugins/plugin_utils/_c.py": f"from {P}._a import z\n"},
     [[f"{P}._a", f"{P}._b", f"{P}._c"]]),
    ({"plugins/plugin_utils/_a.py": f"from {P}._b import x\n",
      "plugins/plugin_utils/_b.py": "import json\n"},
     []),
])
def test_cycle_finder_on_synthetic_modules(sources, expected):
    assert import_cycles(import_graph(sources)) == expected
