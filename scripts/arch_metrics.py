"""Architecture figures of the tritonkit package (issue #30's 'done when').

Prints import circles (every import, inside functions and under TYPE_CHECKING too), modules
over 600 lines, functions over 120 lines, modules naming the backend strings, imports of another
package's private module and public exception classes outside the TritonKitError tree.

    python scripts/arch_metrics.py [--json]
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "tritonkit"
# Code that runs inside Triton (its own process, its own imports) is measured apart.
INSIDE_TRITON = ("tritonkit/triton_side/", "tritonkit/server/backends/", "tritonkit/repository/trtllm_models/")
BACKEND_STRINGS = ("vllm", "tensorrtllm")


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def resolve(mod: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(mods: dict[str, Path]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for mod, path in mods.items():
        tree = ast.parse(path.read_text())
        deps: set[str] = set()
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                target = resolve(mod, path.name == "__init__.py", node)
                names = [target] + [f"{target}.{a.name}" for a in node.names]
            for name in names:
                while name and name not in mods:
                    name = name.rpartition(".")[0]
                if name and name != mod:
                    deps.add(name)
        graph[mod] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan).

    A package's ``__init__`` importing its own sub-modules, and a sub-module importing a sibling
    through the package, is not counted: only imports between modules that are not ancestors of
    one another make an edge.
    """
    def related(a: str, b: str) -> bool:
        return a.startswith(b + ".") or b.startswith(a + ".")

    edges = {m: {d for d in ds if not related(m, d)} for m, ds in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
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
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in edges:
        if v not in index:
            visit(v)
    return out


def inside(path: Path) -> bool:
    rel = path.relative_to(ROOT).as_posix()
    return any(rel.startswith(p) for p in INSIDE_TRITON)


def figures() -> dict[str, object]:
    mods = modules()
    graph = imports(mods)
    long_modules, long_functions, backend_modules, private_imports, stray_errors = [], [], [], [], []
    trees = {m: ast.parse(p.read_text()) for m, p in mods.items()}
    exception_bases: dict[str, list[str]] = {}
    for mod, path in mods.items():
        if inside(path):
            continue
        lines = len(path.read_text().splitlines())
        if lines > 600:
            long_modules.append(f"{mod} ({lines})")
        tree = trees[mod]
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > 120:
                    long_functions.append(f"{mod}.{node.name} ({n})")
            if isinstance(node, ast.ClassDef):
                exception_bases[f"{mod}.{node.name}"] = [ast.unparse(b) for b in node.bases]
        if any(
            isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in BACKEND_STRINGS
            for n in ast.walk(tree)
        ):
            backend_modules.append(mod)
        own_pkg = mod.split(".")[:2]
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                target = resolve(mod, path.name == "__init__.py", node)
                names = [target] + [f"{target}.{a.name}" for a in node.names]
                for name in names:
                    parts = name.split(".")
                    priv = [i for i, p in enumerate(parts) if p.startswith("_") and not p.startswith("__")]
                    if priv and parts[:2] != own_pkg and parts[0] == "tritonkit" and priv[0] >= 2:
                        private_imports.append(f"{mod} -> {name}")
                        break
    # exception classes: transitive bases by simple name
    simple = {k.rsplit(".", 1)[1]: v for k, v in exception_bases.items()}

    def derives(name: str, target: str, seen: set[str]) -> bool:
        if name == target:
            return True
        if name in seen or name not in simple:
            return False
        seen.add(name)
        return any(derives(b.rsplit(".", 1)[-1], target, seen) for b in simple[name])

    for full, bases in exception_bases.items():
        name = full.rsplit(".", 1)[1]
        if name.startswith("_"):
            continue
        is_exc = any(derives(b.rsplit(".", 1)[-1], "Exception", set()) or b.rsplit(".", 1)[-1].endswith(("Error", "Exception")) for b in bases)
        if is_exc and not derives(name, "TritonKitError", set()) and name != "TritonKitError":
            stray_errors.append(full)
    return {
        "import_circles": cycles(graph),
        "modules_over_600_lines": long_modules,
        "functions_over_120_lines": long_functions,
        "modules_naming_backend_strings": backend_modules,
        "private_imports_across_packages": private_imports,
        "exceptions_outside_tree": stray_errors,
    }


def main() -> None:
    f = figures()
    if "--json" in sys.argv:
        print(json.dumps(f, indent=2))
        return
    for key, value in f.items():
        assert isinstance(value, list)
        print(f"{key}: {len(value)}")
        for item in value:
            print(f"    {item}")


if __name__ == "__main__":
    main()
