"""The BLS calls a Python model makes, found statically: which models, versions and outputs.

A Python-backend model calls other models of the server through
``pb_utils.InferenceRequest(...)`` (business logic scripting). Triton loads such a model without
looking at the models it names; a name with a typo fails only when the first request runs that
call. This module reads the model's Python files with ``ast`` (never imports them) and resolves
what each call names, as far as it can be told without running the code:

- a string literal (``model_name="vlm_features"``);
- a module-level constant assigned once (``FEATURES = "vlm_features"``);
- a value read from the model's own config parameters: the name expression (or the one
  assignment to the variable or ``self.`` attribute it names) mentions exactly one string that is
  a key of ``config.parameters`` (``params["FEATURES_MODEL"]["string_value"]``), so the name is
  that parameter's value in config.pbtxt.

Anything else is *dynamic*: reported as such, never guessed. The argument order is the Python
stub's (python_backend ``src/pb_stub.cc``, r24.10): ``request_id, correlation_id, inputs,
requested_output_names, model_name, model_version, ...``; ``model_version`` -1 (the default) is
the server's choice.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tritonkit._python_source import parse_source
from tritonkit.config import ModelConfig

__all__ = ["BlsCall", "bls_calls", "bls_calls_in", "callees", "model_bls_calls", "python_sources"]

_POSITION = {"requested_output_names": 3, "model_name": 4, "model_version": 5}


@dataclass(frozen=True, kw_only=True)
class BlsCall:
    """One ``InferenceRequest(...)`` found in a model's Python file.

    ``model`` is None when the name is dynamic (``expression`` says what the code passes);
    ``source`` says how a known name was found: "literal", "constant NAME" or "parameter KEY";
    for an unknown one "unset parameter KEY" (read from a parameter the config does not set) or
    "dynamic".
    ``outputs`` is None unless every requested output name is a literal; ``version`` is None
    unless a literal version other than -1 is passed. ``hook`` names the lifecycle method the
    call runs in when it is not ``execute``: "initialize" or "finalize" of ``TritonPythonModel``
    (directly, or through a method or module function those call), where the Python stub refuses
    to run it ("BLS is only supported during the 'execute' function.").
    """

    file: Path
    line: int
    model: str | None
    source: str
    expression: str
    version: int | None = None
    outputs: tuple[str, ...] | None = None
    hook: str | None = None


def python_sources(version_dir: Path) -> list[Path]:
    """The Python files a model version runs: its model file and the modules beside it."""
    if not version_dir.is_dir():
        return []
    return sorted(p for p in version_dir.rglob("*.py") if p.is_file() and "__pycache__" not in p.parts)


def model_bls_calls(cfg: ModelConfig, version_dir: Path) -> list[BlsCall]:
    """Every BLS call in the Python files of one version of a Python-backend model."""
    if cfg.backend != "python":
        return []
    return bls_calls_in(version_dir, {key: str(value.string_value) for key, value in cfg.parameters.items()})


def bls_calls_in(version_dir: Path, parameters: Mapping[str, str]) -> list[BlsCall]:
    """Every BLS call in the Python files of ``version_dir``; ``parameters``: the model's config
    parameters (key -> string value), which names may come from."""
    calls: list[BlsCall] = []
    for path in python_sources(version_dir):
        try:
            source = path.read_bytes()
            if b"InferenceRequest" not in source:
                continue  # most Python models make no BLS call: no parse needed
            tree = parse_source(source, str(path))
        except (SyntaxError, ValueError, OSError, RecursionError, MemoryError):
            continue  # the model-file check reports an unparsable model.py
        calls.extend(bls_calls(tree, file=path, parameters=parameters))
    return calls


def bls_calls(tree: ast.Module, *, file: Path, parameters: Mapping[str, str]) -> list[BlsCall]:
    """The ``InferenceRequest(...)`` calls of one parsed file; ``parameters`` are the calling
    model's config parameters (key -> string value)."""
    resolver = _Resolver(tree, parameters)
    hooks = _lifecycle_hooks(tree)
    out: list[BlsCall] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _callee_name(node.func) == "InferenceRequest"):
            continue
        name_expr = _argument(node, "model_name")
        if name_expr is None:
            continue
        model, source = resolver.string(name_expr)
        version_expr = _argument(node, "model_version")
        version = resolver.integer(version_expr) if version_expr is not None else None
        outputs_expr = _argument(node, "requested_output_names")
        out.append(
            BlsCall(
                file=file,
                line=node.lineno,
                model=model,
                source=source,
                expression=ast.unparse(name_expr),
                version=version if version is not None and version >= 0 else None,
                outputs=resolver.strings(outputs_expr) if outputs_expr is not None else None,
                hook=hooks.get(id(node)),
            )
        )
    return out


_EXEC = frozenset({"exec", "async_exec", "stream_exec"})
_HOOKS = ("initialize", "finalize")


def _lifecycle_hooks(tree: ast.Module) -> dict[int, str]:
    """id(InferenceRequest call) -> the hook ("initialize"/"finalize") that runs it.

    Followed from ``TritonPythonModel.initialize``/``finalize`` through ``self.<method>()`` and
    module-function calls; a call counts when the function making it also executes a request
    (``.exec()``, ``.async_exec()``, ``.stream_exec()``). Nested functions and lambdas are not
    followed: they usually run later (threads, callbacks).
    """
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "TritonPythonModel":
            methods = {n.name: n for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    found: dict[int, str] = {}
    for hook in _HOOKS:
        start = methods.get(hook)
        todo = [start] if start is not None else []
        seen: set[int] = set()
        while todo:
            fn = todo.pop()
            if id(fn) in seen:
                continue
            seen.add(id(fn))
            body = list(_own_nodes(fn))
            calls = [n for n in body if isinstance(n, ast.Call)]
            runs = any(isinstance(c.func, ast.Attribute) and c.func.attr in _EXEC for c in calls)
            for call in calls:
                if runs and _callee_name(call.func) == "InferenceRequest":
                    found.setdefault(id(call), hook)
                target = call.func
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                    if target.value.id == "self" and target.attr in methods:
                        todo.append(methods[target.attr])
                elif isinstance(target, ast.Name) and target.id in functions:
                    todo.append(functions[target.id])
    return found


def _own_nodes(fn: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a function's body, not those of functions or lambdas defined inside it."""
    stack = list(ast.iter_child_nodes(fn))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def _callee_name(func: ast.expr) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _argument(call: ast.Call, name: str) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    index = _POSITION[name]
    if len(call.args) > index and not any(isinstance(a, ast.Starred) for a in call.args[: index + 1]):
        return call.args[index]
    return None


class _Resolver:
    """What a name expression holds, as far as the module's text tells it."""

    def __init__(self, tree: ast.Module, parameters: Mapping[str, str]) -> None:
        self.parameters = parameters
        self.constants: dict[str, ast.expr] = {}
        assigned: dict[str, list[ast.expr]] = {}
        for node in ast.walk(tree):
            for target, value in _assignments(node):
                assigned.setdefault(ast.unparse(target), []).append(value)
        self.assigned = assigned
        for node in tree.body:
            for target, value in _assignments(node):
                if isinstance(target, ast.Name) and len(assigned.get(target.id, ())) == 1:
                    self.constants[target.id] = value

    def string(self, expr: ast.expr) -> tuple[str | None, str]:
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            return expr.value, "literal"
        if isinstance(expr, ast.Name) and expr.id in self.constants:
            value = self.constants[expr.id]
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                return value.value, f"constant {expr.id}"
        value = expr
        if isinstance(expr, ast.Name | ast.Attribute):
            values = self.assigned.get(ast.unparse(expr), [])
            if len(values) == 1 and self._parameter_key(expr) is None:
                value = values[0]
        key = self._parameter_key(value)
        if key is not None and self.parameters[key]:
            return self.parameters[key], f"parameter {key}"
        unset = self._unset_parameter(value)
        if unset is not None:
            return None, f"unset parameter {unset}"
        return None, "dynamic"

    def _unset_parameter(self, expr: ast.expr) -> str | None:
        """The key of a config-parameter read (``...["KEY"]["string_value"]``) whose key this
        model's config does not set: the code then has no name to call (often by design: the call
        is skipped when the parameter is empty)."""
        strings = {
            n.value for n in ast.walk(expr) if isinstance(n, ast.Constant) and isinstance(n.value, str)
        }
        if "string_value" not in strings:
            return None
        keys = {s for s in strings if s and s != "string_value"}
        return keys.pop() if len(keys) == 1 else None

    def _parameter_key(self, expr: ast.expr) -> str | None:
        keys = {
            n.value
            for n in ast.walk(expr)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in self.parameters
        }
        return keys.pop() if len(keys) == 1 else None

    def integer(self, expr: ast.expr) -> int | None:
        if isinstance(expr, ast.Name) and expr.id in self.constants:
            expr = self.constants[expr.id]
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
            inner = self.integer(expr.operand)
            return -inner if inner is not None else None
        if (
            isinstance(expr, ast.Constant)
            and isinstance(expr.value, int)
            and not isinstance(expr.value, bool)
        ):
            return expr.value
        return None

    def strings(self, expr: ast.expr) -> tuple[str, ...] | None:
        if isinstance(expr, ast.Name) and expr.id in self.constants:
            expr = self.constants[expr.id]
        if not isinstance(expr, ast.List | ast.Tuple):
            return None
        names = [e.value for e in expr.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        return tuple(names) if len(names) == len(expr.elts) else None


def _assignments(node: ast.AST) -> Iterator[tuple[ast.expr, ast.expr]]:
    """(target, value) of a plain assignment; augmented and unpacking assignments count as a
    second, unknown value so the name is never taken for a constant."""
    if isinstance(node, ast.Assign):
        for target in node.targets:
            if isinstance(target, ast.Tuple | ast.List):
                for element in target.elts:
                    yield element, ast.Constant(value=None)
            else:
                yield target, node.value
    elif isinstance(node, ast.AnnAssign) and node.value is not None:
        yield node.target, node.value
    elif isinstance(node, ast.AugAssign):
        yield node.target, ast.Constant(value=None)
        yield node.target, ast.Constant(value=None)


def callees(calls: Sequence[BlsCall]) -> list[str]:
    """The distinct known model names of ``calls``, in order of first appearance."""
    seen: dict[str, None] = {}
    for call in calls:
        if call.model is not None:
            seen.setdefault(call.model)
    return list(seen)
