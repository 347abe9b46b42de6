"""Architecture figures of the tritonkit package (issues #30 and #43).

Prints import circles counted the way Python runs imports (every import, inside functions and
under TYPE_CHECKING too, and importing ``a.b.c`` runs ``a/__init__`` and ``a/b/__init__`` first),
package-to-package imports outside the allowed edge table (:data:`ALLOWED`, the table
docs/architecture.md shows), modules over 600 lines, functions over 120 lines, modules naming the
backend strings, imports of another package's private module and public exception classes outside
the TritonKitError tree.

    python scripts/arch_metrics.py [--json]
    python scripts/arch_metrics.py --edge-table      # the table, as docs/architecture.md shows it
    python scripts/arch_metrics.py --import-each     # import every module alone (JSON: module -> error)
"""

from __future__ import annotations

import ast
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "tritonkit"
# Code that runs inside Triton (its own process, its own imports) is measured apart.
INSIDE_TRITON = ("tritonkit/triton_side/",)
BACKEND_STRINGS = ("vllm", "tensorrtllm")

#: The allowed package-to-package imports (a package: ``tritonkit.<name>``, a top-level module by
#: its name; a dotted target such as ``kinds.names`` allows that module alone). Every module may
#: import :data:`LEAVES`. Importing a module also runs its packages' ``__init__`` files, which
#: import nothing eagerly (their public names load on first use), so only named modules count here.
ALLOWED: dict[str, tuple[str, ...]] = {
    "__main__": ("cli",),
    "cli": (
        "client",
        "deploy",
        "kinds",
        "llm_pipeline",
        "openai_front",
        "perf",
        "repository",
        "server",
        "tune",
        "tritonkit",
    ),  # fmt: skip
    "tune": ("client", "config", "perf", "repository", "server"),
    "perf": ("client", "llm_pipeline", "repository", "signature"),
    "openai_front": ("client", "kinds.paths", "llm_pipeline", "openai_key", "signature"),
    "deploy": ("client", "config", "kinds", "repository"),
    "server": ("client", "config", "kinds", "repository", "triton_side"),
    "client": ("kinds.names", "llm_pipeline", "signature"),
    "repository": ("config", "kinds", "llm_pipeline", "openai_key"),
    "kinds": ("config", "triton_side"),
    "config": (),
    "openai_key": (),
    "llm_pipeline": (),
    "signature": (),
    "_extras": ("kinds.names",),
}
#: modules every module may import (they import nothing of tritonkit but each other)
LEAVES = (
    "errors",
    "_dtypes",
    "_extras",
    "_files",
    "_lazy",
    "_processes",
    "_python_source",
    "_records",
    "_timeouts",
)
#: what the table notes beside an edge (docs/architecture.md shows the notes too)
NOTES = {
    ("client", "kinds.names"): "(a leaf)",
    ("openai_front", "kinds.paths"): "(the served-path rule)",
    ("kinds", "triton_side"): "(by path)",
    ("server", "triton_side"): "(by path)",
    ("cli", "tritonkit"): "(the version)",
}


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


def imports(mods: dict[str, Path], *, parents: bool = True) -> dict[str, set[str]]:
    """Module -> the modules it imports, anywhere in it (functions, TYPE_CHECKING included).

    With ``parents``, an import of ``tritonkit.a.b.c`` is also an edge to ``tritonkit.a`` and
    ``tritonkit.a.b``: Python runs those ``__init__`` files first (a module's own ancestors are
    left out: they are already being imported when it runs).
    """
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
                    while parents and "." in name:
                        name = name.rpartition(".")[0]
                        if not mod.startswith(name + "."):
                            deps.add(name)
        graph[mod] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan).

    A module importing one of its own packages is not an edge: Python runs a package's
    ``__init__`` before any of its modules, so it is already there (half made or whole). A
    package's ``__init__`` importing its modules is one.
    """
    edges = {m: {d for d in ds if not m.startswith(d + ".")} for m, ds in graph.items()}
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


def unit(mod: str) -> str:
    """The package (or top-level module) ``mod`` belongs to, as :data:`ALLOWED` names it."""
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _allowed(source: str, target: str) -> bool:
    rel = target.partition(".")[2] or target
    names = (*ALLOWED.get(source, ()), *LEAVES, source)
    return any(rel == n or rel.startswith(n + ".") for n in names)


def edges_outside_table(graph: dict[str, set[str]] | None = None) -> list[str]:
    """Every direct import of a module of another package that the edge table does not allow."""
    mods = modules()
    direct = graph if graph is not None else imports(mods, parents=False)
    out = []
    for mod, deps in sorted(direct.items()):
        if inside(mods[mod]) if mod in mods else False:
            continue
        src = unit(mod)
        for dep in sorted(deps):
            if unit(dep) != src and not _allowed(src, dep):
                out.append(f"{mod} -> {dep}")
    return out


def edge_table() -> str:
    """The allowed edges as docs/architecture.md shows them, one package a line."""
    width = max(len(k) for k in ALLOWED) + 2
    rows = []
    for source, targets in ALLOWED.items():
        shown = [" ".join(filter(None, (t, NOTES.get((source, t))))) for t in targets]
        rows.append(f"{source:<{width}}-> {', '.join(shown) if shown else '(leaves only)'}".rstrip())
    rows.append(f"{'every module':<{width}}-> {', '.join(LEAVES)} (the leaves)")
    return "\n".join(rows)


def import_each(names: list[str], workers: int = 2) -> dict[str, str | None]:
    """Import each module alone, in a forked child of an interpreter that holds no tritonkit module
    (third-party modules tritonkit imports at module level are loaded once first, so each child
    pays only for tritonkit's own imports). Module -> None, or the error it raised."""
    assert not any(m == "tritonkit" or m.startswith("tritonkit.") for m in sys.modules)
    _preload(modules())
    results: dict[str, str | None] = {}
    running: dict[int, tuple[str, int]] = {}
    pending = list(names)
    while pending or running:
        while pending and len(running) < workers:
            name = pending.pop(0)
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: import, report, leave without running any cleanup
                os.close(read)
                os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # what a module prints is not the report
                error = ""
                try:
                    __import__(name)
                except BaseException as exc:  # noqa: BLE001 - every failure is the finding
                    error = f"{type(exc).__name__}: {exc}" or "error"
                os.write(write, error.encode())
                os._exit(0)
            os.close(write)
            running[pid] = (name, read)
        pid, status = os.wait()
        name, read = running.pop(pid)
        chunks = []
        while chunk := os.read(read, 65536):
            chunks.append(chunk)
        os.close(read)
        text = b"".join(chunks).decode()
        results[name] = text or (None if status == 0 else f"exit status {status}")
    return results


def importable() -> list[str]:
    """The modules that must import alone: all but code that runs inside Triton (it imports
    ``triton_python_backend_utils``, which only Triton's Python backend provides; the package
    ``tritonkit.triton_side`` itself, the files' paths, is in) and ``tritonkit.__main__`` (the
    ``python -m tritonkit`` entry point: importing it runs the CLI)."""
    return [
        m
        for m, p in modules().items()
        if (not inside(p) or m == "tritonkit.triton_side") and m != "tritonkit.__main__"
    ]


def _preload(mods: dict[str, Path]) -> None:
    """Import the third-party and standard modules tritonkit imports at module level."""
    names: set[str] = set()
    for path in mods.values():
        if inside(path):
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module)
    for name in sorted(names):
        if name.split(".")[0] in ("tritonkit", "__future__"):
            continue
        try:
            __import__(name)
        except Exception:  # noqa: BLE001, S112 - a missing extra fails in the child, where it is read
            continue


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
        is_exc = any(
            derives(b.rsplit(".", 1)[-1], "Exception", set())
            or b.rsplit(".", 1)[-1].endswith(("Error", "Exception"))
            for b in bases
        )
        if is_exc and not derives(name, "TritonKitError", set()) and name != "TritonKitError":
            stray_errors.append(full)
    return {
        "import_circles": cycles(graph),
        "edges_outside_table": edges_outside_table(imports(mods, parents=False)),
        "modules_over_600_lines": long_modules,
        "functions_over_120_lines": long_functions,
        "modules_naming_backend_strings": backend_modules,
        "private_imports_across_packages": private_imports,
        "exceptions_outside_tree": stray_errors,
    }


def main() -> None:
    if "--edge-table" in sys.argv:
        print(edge_table())
        return
    if "--import-each" in sys.argv:
        names = importable()
        print(json.dumps(import_each(names), indent=1))
        return
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
