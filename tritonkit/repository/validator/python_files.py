"""A Python model's source checked against its config: tensor names, decoupled returns.

The source is parsed with ``ast``, never imported.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritonkit._python_source import parse_source
from tritonkit.config import ModelConfig
from tritonkit.repository.validator.report import Problem, Severity

__all__ = ["decoupled_execute_return", "python_findings"]


@dataclass(frozen=True)
class _PyNames:
    reads: list[tuple[str, int]]
    builds: list[tuple[str, int]]
    autocomplete_names: set[str]
    bls: bool


def _literal(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _scan_python(tree: ast.AST) -> _PyNames:
    reads: list[tuple[str, int]] = []
    builds: list[tuple[str, int]] = []
    auto: set[str] = set()
    bls = False
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "auto_complete_config":
            auto.update(
                n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            )
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        attr = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if attr == "get_input_tensor_by_name" and len(node.args) >= 2:
            name = _literal(node.args[1])
            if name is not None:
                reads.append((name, node.lineno))
        elif attr == "Tensor" or (
            attr == "from_dlpack"
            and isinstance(func, ast.Attribute)
            and getattr(func.value, "attr", "") == "Tensor"
        ):
            name = _literal(node.args[0]) if node.args else None
            if name is not None:
                builds.append((name, node.lineno))
        elif attr == "InferenceRequest":
            bls = True
    return _PyNames(reads=reads, builds=builds, autocomplete_names=auto, bls=bls)


def decoupled_execute_return(tree: ast.AST) -> int | None:
    """Line of the first ``return <value>`` (not None) in TritonPythonModel.execute, if any.

    An execute() that branches on its own decoupled setting (an ``if`` whose test names
    ``decoupled``, e.g. ``if self.decoupled:``) serves both transaction policies from one source,
    so its unary branch may return responses: not reported.
    """
    for cls in ast.walk(tree):
        if not (isinstance(cls, ast.ClassDef) and cls.name == "TritonPythonModel"):
            continue
        for fn in cls.body:
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) and fn.name == "execute":
                if any(
                    isinstance(node, ast.If) and "decoupled" in ast.unparse(node.test).lower()
                    for node in ast.walk(fn)
                ):
                    return None
                return _first_value_return(fn.body)
    return None


def _first_value_return(body: list[ast.stmt]) -> int | None:
    """Returns of this function only: nested functions, lambdas and classes have their own."""
    todo: list[ast.AST] = list(body)
    found: list[int] = []
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            continue
        if isinstance(node, ast.Return) and node.value is not None:
            if not (isinstance(node.value, ast.Constant) and node.value.value is None):
                found.append(node.lineno)
        todo.extend(ast.iter_child_nodes(node))
    return min(found) if found else None


_READ = re.compile(rb"""get_input_tensor_by_name\s*\(\s*[^,()]+,\s*(['"])([^'"\\]*)\1\s*\)""")
_BUILD = re.compile(rb"""\bTensor\s*\(\s*(['"])([^'"\\]*)\1""")
_ANY_BUILD = re.compile(rb"\bTensor\s*[(.]")


def _names_match_fast(source: bytes, cfg: ModelConfig) -> bool:
    """True when a text scan already shows every literal name is declared (the common case).

    Only a sure "all fine" short-cuts the AST walk; anything the patterns cannot account for
    (computed names, from_dlpack, BLS, auto_complete_config) goes to the full scan.
    """
    reads = [m.group(2).decode("utf-8", "replace") for m in _READ.finditer(source)]
    builds = [m.group(2).decode("utf-8", "replace") for m in _BUILD.finditer(source)]
    if source.count(b"get_input_tensor_by_name") != len(reads):
        return False
    if len(_ANY_BUILD.findall(source)) != len(builds):
        return False
    inputs = {t.name for t in cfg.input}
    outputs = {t.name for t in cfg.output}
    return all(n in inputs for n in reads) and all(n in outputs for n in builds)


#: what the warnings for a tensor name the config does not declare say ({name}, {declared})
_READ_UNDECLARED = (
    "model.py reads input '{name}', which the config does not declare (inputs: {declared}); "
    "the request will not carry it"
)
_BUILT_UNDECLARED = (
    "model.py returns a tensor named '{name}', which is not a config output (outputs: {declared}); "
    "clients asking for the config's outputs will not get it"
)


def python_findings(cfg: ModelConfig, path: Path, *, display: str, model: str) -> list[Problem]:
    """Literal tensor names a model.py reads/builds that the config does not declare (warnings).

    The source is parsed with ``ast``, never imported. Names computed at run time are not seen,
    so the verdict is a warning. A model that sends BLS requests builds tensors for other
    models too, so its built names are not checked.
    """

    def problem(severity: Severity, code: str, line: int | None, message: str) -> Problem:
        return Problem(severity=severity, model=model, file=display, line=line, code=code, message=message)

    def undeclared(
        found: list[tuple[str, int]], known: set[str], declared: Iterable[Any], template: str
    ) -> list[Problem]:
        """A warning for each name in ``found`` outside ``known``, worded by ``template``."""
        listing = ", ".join(sorted(t.name for t in declared))
        return [
            problem("warning", "python-tensor-unknown", ln, template.format(name=n, declared=listing))
            for n, ln in found
            if n not in known
        ]

    try:
        source = path.read_bytes()
        tree = parse_source(source, str(path))
    except SyntaxError as exc:
        return [
            problem(
                "error",
                "model-file-unreadable",
                exc.lineno,
                f"model.py does not parse as Python: {exc.msg}; the Python backend cannot import it",
            )
        ]
    except (OSError, ValueError) as exc:  # ValueError: null bytes in the source
        return [problem("error", "model-file-unreadable", None, f"cannot read the Python model: {exc}")]
    except (RecursionError, MemoryError):
        return [
            problem(
                "warning",
                "model-file-unreadable",
                None,
                "model.py nests expressions too deeply for tritonkit's parser; "
                "its tensor names were not checked",
            )
        ]
    out: list[Problem] = []
    line = decoupled_execute_return(tree) if cfg.model_transaction_policy.decoupled else None
    if line is not None:
        out.append(
            problem(
                "warning",
                "python-decoupled-returns",
                line,
                "the model is decoupled but execute() returns responses; the Python backend then "
                'fails every request ("is using the decoupled mode and the execute function must '
                'return None"): send them with request.get_response_sender() and return None',
            )
        )
    if _names_match_fast(source, cfg):
        return out
    names = _scan_python(tree)
    inputs = {t.name for t in cfg.input} | names.autocomplete_names
    if cfg.HasField("sequence_batching"):
        inputs |= {ci.name for ci in cfg.sequence_batching.control_input}
        inputs |= {s.input_name for s in cfg.sequence_batching.state}
    inputs |= {name for bi in cfg.batch_input for name in bi.target_name}
    if cfg.input:
        out += undeclared(names.reads, inputs, cfg.input, _READ_UNDECLARED)
    outputs = {t.name for t in cfg.output} | names.autocomplete_names
    if cfg.HasField("sequence_batching"):
        outputs |= {s.output_name for s in cfg.sequence_batching.state}
    if cfg.output and not names.bls:
        out += undeclared(names.builds, outputs, cfg.output, _BUILT_UNDECLARED)
    return out
