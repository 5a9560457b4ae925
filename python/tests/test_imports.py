"""The package's import graph, drawn from the code (every relative import,
in functions and ``TYPE_CHECKING`` blocks too): no circle, and the engine
imports nothing of the API above it (``ARCHITECTURE.md``: it calls up only
through ``Service``). The Python counterpart of ``scripts/imports.py``."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "hubwire"
API = {"hubwire.client", "hubwire.provider", "hubwire.stream", "hubwire.connection", "hubwire.testing", "hubwire.blocking"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in PKG.rglob("*.py")}
    edges: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or node.level == 0:
                continue
            base = package.split(".")
            base = base[: len(base) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
            if node.module is None:  # from . import x: x may be a module
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    edges[name].add(sub if sub in modules else target)
            else:
                edges[name].add(target)
    for m in edges:  # a package's __init__ re-exports its modules; a module importing its own package is no edge
        edges[m] = {t for t in edges[m] if t in modules and t != m and not m.startswith(t + ".")}
    return edges


def test_no_circle_in_the_package() -> None:
    g = graph()
    seen: dict[str, int] = {}
    stack: list[str] = []

    def visit(v: str) -> None:
        seen[v] = 1
        stack.append(v)
        for w in sorted(g[v]):
            if seen.get(w) == 1:
                raise AssertionError("import circle: " + " -> ".join(stack[stack.index(w):] + [w]))
            if w not in seen:
                visit(w)
        stack.pop()
        seen[v] = 2

    for v in sorted(g):
        if v not in seen:
            visit(v)


def test_the_engine_calls_up_into_nothing() -> None:
    g = graph()
    for m, targets in g.items():
        if m.startswith("hubwire.engine"):
            assert not targets & API, f"{m} imports {sorted(targets & API)}"
    assert "hubwire.engine.serve" in g["hubwire.engine.reader"]  # the seam is where the engine hands calls over
