#!/usr/bin/env python3
"""The import graph of a Rust crate's or a TypeScript package's source tree,
drawn from the code, and the circles in it.

    scripts/imports.py rust rust/hubwire/src      # a crate (lib.rs and its modules)
    scripts/imports.py ts ts/src                  # a TypeScript tree
    scripts/imports.py --check                    # every tree the project keeps circle-free

A node is a source file; an edge A -> B says that A names something B
defines. Rust: every `crate::…`, `super::…` and `self::…` path, in `use`
lines and in code, resolved through the crate root's and each `mod.rs`'s
`pub use` re-exports to the file that defines the item; comments,
string literals and `#[cfg(test)]` modules are left out (tests may reach
anywhere), and so are `mod` declarations and re-exports themselves (a table
of contents is not a dependency); `src/bin/` holds separate crates. TS:
every relative `import`/`export … from` and `import()`, type-only imports
included (a type is a dependency of the design even when erased).

Prints each file with its layer (0 = imports nothing of the tree; each
file sits one above the highest file it imports), then the circles, and
exits 1 if there is one. `--edges` prints the edges too; `--dot` prints
Graphviz instead.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

# The trees `--check` covers: (language, source root).
CHECKED = [
    ("rust", "rust/hubwire/src"),
    ("rust", "bench/rust/src"),
    ("ts", "ts/src"),
]


# ---- Rust -------------------------------------------------------------------


def strip_rust(text: str) -> str:
    """Removes comments, string and char literals (keeping line breaks)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    if text[i] == "\n":
                        out.append("\n")
                    i += 1
        elif c == "r" and re.match(r'r#*"', text[i:i + 8]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'r(#*)"', text[i:])
            close = '"' + m.group(1)
            j = text.find(close, i + len(m.group(0)))
            j = n if j < 0 else j + len(close)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 4] if text[i + 1:i + 2] != "\\" else text[i:i + 12]):
            m = re.match(r"'(\\[^']*|[^\\'])'", text[i:])
            out.append("' '")
            i += len(m.group(0)) if m else 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def drop_test_modules(code: str) -> str:
    """Cuts every `#[cfg(test)] mod x { … }` block."""
    while True:
        m = re.search(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{", code)
        if not m:
            return code
        depth, j = 1, m.end()
        while j < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[j], 0)
            j += 1
        code = code[:m.start()] + "\n" * code.count("\n", m.start(), j) + code[j:]


def expand_use(tree: str) -> list[str]:
    """`a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e'] (renames dropped)."""
    tree = re.sub(r"\s+as\s+\w+", "", tree)
    tree = re.sub(r"\s+", "", tree)

    def split_top(s: str) -> list[str]:
        parts, depth, cur = [], 0, ""
        for ch in s:
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
                continue
            depth += {"{": 1, "}": -1}.get(ch, 0)
            cur += ch
        if cur:
            parts.append(cur)
        return parts

    def go(s: str) -> list[str]:
        i = s.find("{")
        if i < 0:
            return [s]
        prefix, inner = s[:i], s[i + 1:s.rfind("}")]
        return [prefix + p for part in split_top(inner) for p in go(part)]

    return [p for p in go(tree) if p]


class RustCrate:
    def __init__(self, root: str):
        self.root = root
        self.files: dict[tuple[str, ...], str] = {}  # module path -> file
        for dirpath, dirs, names in os.walk(root):
            rel = os.path.relpath(dirpath, root)
            parts = () if rel == "." else tuple(rel.split(os.sep))
            if parts[:1] == ("bin",):
                continue
            for name in names:
                if not name.endswith(".rs"):
                    continue
                stem = name[:-3]
                if parts == () and stem in ("lib", "main"):
                    mod = ()
                elif stem == "mod":
                    mod = parts
                else:
                    mod = parts + (stem,)
                if mod == () and () in self.files:
                    continue  # lib.rs wins over main.rs
                self.files[mod] = os.path.join(dirpath, name)
        self.code = {m: drop_test_modules(strip_rust(open(f, encoding="utf-8").read())) for m, f in self.files.items()}
        # Re-exports: module -> {name: full path it stands for}.
        self.reexports: dict[tuple[str, ...], dict[str, tuple[str, ...]]] = {}
        for mod, code in self.code.items():
            table = {}
            for m in re.finditer(r"\bpub(\([^)]*\))?\s+use\s+([^;]+);", code):
                for path in expand_use(m.group(2)):
                    segs = self.absolute(mod, path.split("::"))
                    if segs and segs[-1] not in ("*", "self"):
                        table[segs[-1]] = tuple(segs)
            self.reexports[mod] = table

    def absolute(self, mod: tuple[str, ...], segs: list[str]) -> list[str] | None:
        """A path as seen from `mod`, made absolute (None: another crate)."""
        if not segs:
            return None
        if segs[0] == "crate":
            return segs[1:]
        if segs[0] == "self":
            return list(mod) + segs[1:]
        if segs[0] == "super":
            base = list(mod)
            while segs and segs[0] == "super":
                base = base[:-1]
                segs = segs[1:]
            return base + segs
        # A path relative to the module (`use foo::X` of a child module).
        if mod + (segs[0],) in self.files:
            return list(mod) + segs
        return None

    def resolve(self, segs: list[str], depth: int = 0) -> tuple[str, ...] | None:
        """The module (file) that defines what the absolute path names."""
        mod: tuple[str, ...] = ()
        for i, s in enumerate(segs):
            if mod + (s,) in self.files:
                mod = mod + (s,)
                continue
            target = self.reexports.get(mod, {}).get(s)
            if target is not None and depth < 8 and list(target) != segs[: i + 1]:
                return self.resolve(list(target) + segs[i + 1:], depth + 1)
            break
        return mod

    def edges(self) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {f: set() for f in self.files.values()}
        for mod, code in self.code.items():
            # A table of contents is not a dependency.
            body = re.sub(r"\b(pub(\([^)]*\))?\s+)?mod\s+\w+\s*;", "", code)
            body = re.sub(r"\bpub(\([^)]*\))?\s+use\s+[^;]+;", "", body)
            paths = []
            for m in re.finditer(r"\buse\s+([^;]+);", body):
                paths += expand_use(m.group(1))
            # Names `use` brought in, for paths in code that start with one
            # (`use crate::systems;` … `systems::grpc::serve(…)`).
            local = {}
            for i, p in enumerate(paths):
                if p.endswith("::self"):  # `use a::b::{self}` imports module b
                    paths[i] = p = p[: -len("::self")]
                segs = self.absolute(mod, p.split("::"))
                if segs and segs[-1] != "*":
                    local[segs[-1]] = segs
            body = re.sub(r"\buse\s+[^;]+;", "", body)
            for p in re.findall(r"(?<![\w:])(\w+(?:::\w+)+)", body):
                head, *rest = p.split("::")
                if head in ("crate", "super", "self"):
                    paths.append(p)
                elif head in local:
                    paths.append("::".join(["crate"] + local[head] + rest))
                elif mod + (head,) in self.files:
                    paths.append(p)
            for p in paths:
                segs = self.absolute(mod, p.split("::"))
                if segs is None:
                    continue
                target = self.resolve(segs)
                if target is not None and target != mod and target in self.files:
                    out[self.files[mod]].add(self.files[target])
        return out


# ---- TypeScript -------------------------------------------------------------


def ts_edges(root: str) -> dict[str, set[str]]:
    files = []
    for dirpath, _, names in os.walk(root):
        files += [os.path.join(dirpath, n) for n in names if n.endswith(".ts") and not n.endswith(".d.ts")]
    out: dict[str, set[str]] = {f: set() for f in files}
    pattern = re.compile(r"""(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)["'](\.{1,2}/[^"']+)["']""", re.M)
    for f in files:
        text = open(f, encoding="utf-8").read()
        text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
        text = re.sub(r"(?m)^\s*//.*$", "", text)
        for spec in pattern.findall(text):
            target = os.path.normpath(os.path.join(os.path.dirname(f), spec))
            target = re.sub(r"\.js$", ".ts", target)
            if not target.endswith(".ts"):
                target += ".ts"
            if target in out and target != f:
                out[f].add(target)
    return out


# ---- The graph --------------------------------------------------------------


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one file (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def layers(graph: dict[str, set[str]]) -> dict[str, int]:
    """Each file's layer: 0 if it imports nothing, else one above its highest import."""
    layer: dict[str, int] = {}

    def of(v: str, seen: frozenset[str]) -> int:
        if v in layer:
            return layer[v]
        if v in seen:
            return 0  # a circle: reported separately
        deps = [of(w, seen | {v}) for w in graph[v]]
        layer[v] = 1 + max(deps) if deps else 0
        return layer[v]

    for v in graph:
        of(v, frozenset())
    return layer


def report(lang: str, root: str, show_edges: bool, dot: bool) -> bool:
    graph = RustCrate(root).edges() if lang == "rust" else ts_edges(root)
    rel = lambda p: os.path.relpath(p, root)  # noqa: E731
    found = cycles(graph)
    if dot:
        print(f'digraph "{root}" {{\n  rankdir=BT;')
        for v in sorted(graph):
            for w in sorted(graph[v]):
                print(f'  "{rel(v)}" -> "{rel(w)}";')
        print("}")
        return not found
    lay = layers(graph)
    print(f"== {root} ({lang}): {len(graph)} files, {sum(len(e) for e in graph.values())} imports")
    for v in sorted(graph, key=lambda v: (lay[v], rel(v))):
        deps = ", ".join(sorted(rel(w) for w in graph[v])) if show_edges else ""
        print(f"  {lay[v]:2}  {rel(v)}" + (f"  -> {deps}" if deps else ""))
    if found:
        for comp in found:
            print(f"  CIRCLE: {' <-> '.join(rel(v) for v in comp)}")
    else:
        print("  no circle")
    return not found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("lang", nargs="?", choices=["rust", "ts"])
    ap.add_argument("root", nargs="?")
    ap.add_argument("--check", action="store_true", help="every tree the project keeps circle-free")
    ap.add_argument("--edges", action="store_true", help="list each file's imports")
    ap.add_argument("--dot", action="store_true", help="print Graphviz")
    a = ap.parse_args()
    if a.check:
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        ok = [report(lang, os.path.join(here, root), a.edges, False) for lang, root in CHECKED]
        passed = sum(ok)
        print(f"imports: {passed} passed, {len(ok) - passed} failed")
        return 0 if all(ok) else 1
    if not a.lang or not a.root:
        ap.error("give a language and a source root, or --check")
    return 0 if report(a.lang, a.root, a.edges, a.dot) else 1


if __name__ == "__main__":
    sys.exit(main())
