"""The package's import graph: no circles, and the JIT runtime imports none of its clients.

Every ``import`` statement counts, module level or inside a function (a lazy import still makes a
circle, e.g. the old ``jit/kernel.py:precompile`` importing ``indexed`` and ``ops``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import chord_kernels

SRC = Path(chord_kernels.__file__).resolve().parent.parent
MODULES = {
    ".".join(p.relative_to(SRC).with_suffix("").parts[:-1] if p.name == "__init__.py"
             else p.relative_to(SRC).with_suffix("").parts): p
    for p in (SRC / "chord_kernels").rglob("*.py")
}


def _imports(module: str) -> set[str]:
    """The chord_kernels modules ``module`` names in any import statement (not implicit parents)."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in MODULES)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in MODULES else base)
    return {m for m in found if m in MODULES and m != module}


GRAPH = {m: _imports(m) for m in MODULES}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    state: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                found.append([*stack[stack.index(nxt):], nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def _reachable(start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in GRAPH[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen


def test_the_walk_sees_the_package() -> None:
    assert {"chord_kernels", "chord_kernels.jit.kernel", "chord_kernels.indexed.planner"} <= set(MODULES)
    assert "chord_kernels.jit.cache" in GRAPH["chord_kernels.jit.kernel"]  # `from chord_kernels.jit import cache`
    assert "chord_kernels.families" in GRAPH["chord_kernels.packed"]  # an import inside a function
    assert "chord_kernels.indexed.decode" in GRAPH["chord_kernels.indexed.planner"]


def test_no_import_circles() -> None:
    assert _cycles(GRAPH) == []
    # The walk does find a circle when there is one.
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]


def test_the_runtime_and_the_registry_import_no_kernel_family() -> None:
    families = {m for m in MODULES if m.startswith(("chord_kernels.indexed", "chord_kernels.ops"))}
    for base in ("chord_kernels.jit", "chord_kernels.jit.kernel", "chord_kernels.packed", "chord_kernels.families"):
        assert not _reachable(base) & families, f"{base} imports {sorted(_reachable(base) & families)}"


def test_no_product_module_imports_the_bench_harness() -> None:
    bench = {m for m in MODULES if m.startswith("chord_kernels.bench")}
    for module in set(MODULES) - bench:
        assert not GRAPH[module] & bench, f"{module} imports {sorted(GRAPH[module] & bench)}"

