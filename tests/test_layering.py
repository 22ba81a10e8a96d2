"""The layering rule of docs/architecture.md, read from the source: every `import` of every module under
src/hlocc (lazy imports inside functions included; imports only under `if TYPE_CHECKING:` aside), checked
for import cycles and for imports against the layer order, and every source file's length.

    errors <- hlo <- analysis, evaluator, comparison <- passes <- codegen <- runtime <- backends
           <- frontends <- compiler <- cli, tools <- the package's __init__

A module may import its own layer and the layers below it, never one above; no two modules may import each
other, directly or around a longer loop (a cycle makes the import order, and so the program, depend on which
module a user happens to import first).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

# Lowest first. A module belongs to the layer of the longest prefix that names it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("hlocc.errors",),
    ("hlocc.hlo",),
    ("hlocc.analysis", "hlocc.evaluator", "hlocc.comparison"),
    ("hlocc.passes",),
    ("hlocc.codegen",),
    ("hlocc.runtime",),
    ("hlocc.backends",),
    ("hlocc.frontends",),
    ("hlocc.compiler",),
    ("hlocc.cli", "hlocc.tools", "hlocc.testing", "hlocc.jax", "hlocc.torch", "hlocc.__main__"),
    ("hlocc",),
)
MAX_LINES = 600


def _modules() -> dict[str, tuple[Path, bool]]:
    mods = {}
    for path in sorted((SRC / "hlocc").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        mods[".".join(parts)] = (path, is_package)
    return mods


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the nodes inside `if TYPE_CHECKING:` blocks."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
            if name == "TYPE_CHECKING":
                for stmt in node.body:
                    skip.update(id(n) for n in ast.walk(stmt))
    return skip


def import_graph() -> dict[str, set[str]]:
    """module -> the hlocc modules it imports (a `from package import name` names the submodule when
    `name` is one, else the package's __init__)."""
    mods = _modules()
    graph: dict[str, set[str]] = defaultdict(set)
    for name, (path, is_package) in mods.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        skip = _type_checking_only(tree)
        package = name if is_package else name.rpartition(".")[0]
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in mods else module for a in node.names]
            graph[name].update(t for t in targets if t in mods and t != name)
    return graph


def layer_of(module: str) -> int:
    best, best_len = None, -1
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = index, len(prefix)
    assert best is not None, f"module {module} is in no layer: add its package to LAYERS"
    return best


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    cycles: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = counter
                    counter += 1
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph.get(succ, ())))))
                    advanced = True
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


@pytest.fixture(scope="module")
def graph():
    return import_graph()


def test_no_import_cycles(graph):
    cycles = import_cycles(graph)
    assert not cycles, "import cycles among src/hlocc modules:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_no_import_against_the_layer_order(graph):
    upward = [f"{m} (layer {layer_of(m)}) imports {t} (layer {layer_of(t)})"
              for m, targets in sorted(graph.items()) for t in sorted(targets) if layer_of(t) > layer_of(m)]
    assert not upward, "imports of a higher layer:\n" + "\n".join(upward)


def test_every_module_has_a_layer():
    for module in _modules():
        layer_of(module)


def test_no_source_file_over_the_limit():
    long = [f"{path.relative_to(SRC)}: {n} lines" for path, _ in _modules().values()
            if (n := len(path.read_text().splitlines())) > MAX_LINES]
    assert not long, f"source files over {MAX_LINES} lines (split them by concept):\n" + "\n".join(long)


def test_the_checker_finds_a_cycle_and_an_upward_import():
    """The rule's own check: a planted cycle and a planted upward import are reported."""
    planted = {"hlocc.hlo.a": {"hlocc.hlo.b"}, "hlocc.hlo.b": {"hlocc.hlo.c"}, "hlocc.hlo.c": {"hlocc.hlo.a"},
               "hlocc.passes.x": {"hlocc.runtime.y"}}
    assert import_cycles(planted) == [["hlocc.hlo.a", "hlocc.hlo.b", "hlocc.hlo.c"]]
    assert layer_of("hlocc.runtime.y") > layer_of("hlocc.passes.x")
    assert layer_of("hlocc.codegen.emitters.loop") == layer_of("hlocc.codegen")


def test_test_files_have_unique_basenames():
    """pytest imports test files by basename (rootdir, no packages): two of one name cannot both run."""
    names: dict[str, list[str]] = {}
    for path in (SRC.parent / "tests").rglob("test_*.py"):
        names.setdefault(path.name, []).append(str(path.relative_to(SRC.parent)))
    clashes = {n: p for n, p in names.items() if len(p) > 1}
    assert not clashes, f"test files sharing a basename: {clashes}"
