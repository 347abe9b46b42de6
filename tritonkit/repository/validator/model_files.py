"""Configs checked against their model files: ONNX graph I/O, Python sources, TorchScript names.

ONNX rules mirror what Triton's native onnxruntime backend checks when it loads a model
(``ValidateInputs``/``ValidateOutputs``/``AutoCompleteMaxBatch`` in onnxruntime_backend
``src/onnxruntime.cc`` and ``CompareDimsSupported`` in ``src/onnxruntime_utils.cc``):

- every config input/output names a graph input (or overridable initializer)/output;
- the config declares as many inputs (plus batch inputs, sequence controls and states) as the
  graph has non-initializer inputs;
- data types are equal;
- shapes: the config shape (``reshape`` if given, else ``dims``; with ``max_batch_size > 0`` a
  leading -1 batch dimension prepended) has the graph's rank; for inputs a graph dim of -1
  (symbolic) accepts any config dim, for outputs the backend compares exactly;
- with ``max_batch_size > 0`` every graph tensor's first dim must be variable.

Only the graph's I/O is read (:mod:`tritonkit.repository.onnx_io`), never the weights. Where
onnxruntime may change what the file declares (its shape inference can resolve a symbolic
output dim) the verdict is a warning, not an error. The local server's Python-based
onnxruntime backend only compares names; production runs the native backend, so these rules
follow the native one.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritonkit.config import ModelConfig, data_type_name
from tritonkit.repository.onnx_io import OnnxIO, OnnxReadError, OnnxValue, read_onnx_io
from tritonkit.repository.validator.layout import expected_model_file, selected_versions
from tritonkit.repository.validator.report import ConfigFile, Problem, Severity

__all__ = [
    "Finding",
    "check_model_files",
    "onnx_findings",
    "python_findings",
    "torchscript_findings",
]

_CONTROL_KINDS = ("CONTROL_SEQUENCE_START", "CONTROL_SEQUENCE_END", "CONTROL_SEQUENCE_READY")


@dataclass(frozen=True, kw_only=True)
class Finding:
    """One cross-check result; ``at`` is a config field path (its line), or None."""

    severity: Severity
    code: str
    message: str
    at: str | None = None


def _family(cfg: ModelConfig) -> str | None:
    if cfg.platform == "onnxruntime_onnx" or cfg.backend == "onnxruntime":
        return "onnx"
    if cfg.backend == "python":
        return "python"
    if cfg.platform == "pytorch_libtorch" or cfg.backend == "pytorch":
        return "torchscript"
    if cfg.platform == "tensorrt_plan" or cfg.backend == "tensorrt":
        return "tensorrt"
    return None


def _family_and_file(
    cfg: ModelConfig, model_dir: Path, versions: Sequence[int]
) -> tuple[str | None, str | None]:
    family, filename = _family(cfg), expected_model_file(cfg)
    if family is None and not cfg.platform and not cfg.backend:
        # Triton picks the backend from the file it finds (model.onnx, model.py)
        chosen = selected_versions(cfg, versions)
        for name, fam in (("model.onnx", "onnx"), ("model.py", "python")):
            if any((model_dir / str(v) / name).exists() for v in chosen):
                return fam, name
    return family, filename


def check_model_files(cf: ConfigFile, *, model_dir: Path, display_dir: str, versions: Sequence[int]) -> None:
    """Cross-check ``cf`` against the model file of every version Triton would load."""
    cfg = cf.config
    family, filename = _family_and_file(cfg, model_dir, versions)
    if family is None or filename is None:
        return
    if family == "tensorrt":
        cf.info(
            "model-file-not-inspected",
            f"{filename} is a serialized TensorRT engine; tritonkit does not inspect it, so its tensor "
            "names, data types and shapes are checked only by Triton when it loads the engine",
            at="platform" if cfg.platform else "backend",
        )
        return
    if family == "torchscript":
        for finding in torchscript_findings(cfg):
            _report(cf, finding, prefix="")
        return
    # a finding shared by several versions is reported once, naming them
    grouped: dict[Finding, list[str]] = {}
    for v in selected_versions(cfg, versions):
        path = model_dir / str(v) / filename
        if not path.exists():
            continue  # layout reports model-file-missing
        rel = f"{v}/{filename}"
        if family == "onnx":
            try:
                io = read_onnx_io(path)
            except OnnxReadError as exc:
                findings = [
                    Finding(
                        severity="error",
                        code="model-file-unreadable",
                        message=f"{{file}} is not a readable ONNX model: {exc} (re-export it, or check it "
                        "was not truncated or stored as a Git LFS pointer)",
                        at="default_model_filename" if cfg.default_model_filename else None,
                    )
                ]
            else:
                findings = onnx_findings(cfg, io, filename="{file}")
            for f in findings:
                grouped.setdefault(f, []).append(rel)
        else:
            for problem in python_findings(cfg, path, display=f"{display_dir}/{rel}", model=cf.model):
                cf.add(problem)
    for finding, files in grouped.items():
        _report(cf, finding, prefix=", ".join(files))


def _report(cf: ConfigFile, f: Finding, *, prefix: str) -> None:
    message = f.message.replace("{file}", prefix) if prefix else f.message
    {"error": cf.error, "warning": cf.warning, "info": cf.info}[f.severity](f.code, message, at=f.at)


# -- ONNX ---------------------------------------------------------------------------------------


def _shape(values: Iterable[int]) -> str:
    return "[" + ", ".join(str(d) for d in values) + "]"


def _config_shape(t: Any) -> tuple[tuple[int, ...], str]:
    if t.HasField("reshape"):
        return tuple(t.reshape.shape), "reshape"
    return tuple(t.dims), "dims"


def _controls(cfg: ModelConfig) -> list[tuple[int, int, str, str]]:
    """(control_input index, control index, tensor name, Triton data type) of each control."""
    out: list[tuple[int, int, str, str]] = []
    if not cfg.HasField("sequence_batching"):
        return out
    for i, ci in enumerate(cfg.sequence_batching.control_input):
        for j, control in enumerate(ci.control):
            kind = type(control).Kind.Name(control.kind)
            if kind == "CONTROL_SEQUENCE_CORRID":
                out.append((i, j, ci.name, data_type_name(control.data_type)))
            elif kind in _CONTROL_KINDS:
                dtype = "INT32" if control.int32_false_true else "FP32" if control.fp32_false_true else "BOOL"
                out.append((i, j, ci.name, dtype))
    return out


def onnx_findings(cfg: ModelConfig, io: OnnxIO, *, filename: str) -> list[Finding]:
    """What Triton's onnxruntime backend would refuse when loading ``cfg`` with this graph."""
    out: list[Finding] = []
    mbs = cfg.max_batch_size
    odd = [v for v in io.inputs + io.outputs if v.kind != "tensor"]
    if odd:
        names = ", ".join(f"'{v.name}' ({v.kind})" for v in odd)
        return [
            Finding(
                severity="error",
                code="onnx-unsupported-type",
                message=f"{filename} has graph I/O that is not a tensor: {names}; Triton's onnxruntime "
                "backend accepts tensors only",
            )
        ]
    declared_in = len(cfg.input) + len(cfg.batch_input)
    autocomplete = declared_in == 0 or not cfg.output
    check_dims = True
    if autocomplete:
        if not io.batchable and mbs > 0:
            fixed = [v.name for v in io.inputs + io.outputs if not (v.shape and v.shape[0] == -1)]
            out.append(
                Finding(
                    severity="error",
                    code="onnx-batch-dim",
                    message=f"max_batch_size is {mbs} but {filename} cannot batch: "
                    f"{', '.join(repr(n) for n in fixed)} {'has' if len(fixed) == 1 else 'have'} no variable "
                    "first dimension, so Triton's auto-complete refuses the model; set max_batch_size: 0 "
                    "or export the model with a dynamic first dimension",
                    at="max_batch_size",
                )
            )
            return out
        # auto-complete picks max_batch_size itself for a batchable graph left at 0
        check_dims = not (io.batchable and mbs == 0)
    inputs = {v.name: v for v in io.initializer_inputs}
    inputs.update({v.name: v for v in io.inputs})
    outputs = {v.name: v for v in io.outputs}
    controls = _controls(cfg)
    if declared_in:
        states = len(cfg.sequence_batching.state) if cfg.HasField("sequence_batching") else 0
        expected = sum(1 for t in cfg.input if not t.optional) + len(cfg.batch_input)
        expected += len({name for _, _, name, _ in controls}) + states
        if expected != len(io.inputs):
            declared = {t.name for t in cfg.input} | {n for _, _, n, _ in controls}
            missing = [v.name for v in io.inputs if v.name not in declared]
            hint = f"; not in the config: {', '.join(missing)}" if missing else ""
            out.append(
                Finding(
                    severity="error",
                    code="onnx-input-count",
                    message=f"the config gives {expected} model input(s) but {filename} has {len(io.inputs)} "
                    f"({', '.join(v.name for v in io.inputs) or 'none'}){hint}; Triton's onnxruntime "
                    "backend requires every graph input to be declared",
                    at="input[0]" if cfg.input else None,
                )
            )
    batch_targets = {name for bo in cfg.batch_output for name in bo.target_name}
    for kind, tensors, graph in (("input", cfg.input, inputs), ("output", cfg.output, outputs)):
        for i, t in enumerate(tensors):
            at = f"{kind}[{i}]"
            if kind == "input" and t.optional and mbs != 0:
                out.append(
                    Finding(
                        severity="error",
                        code="onnx-optional-batching",
                        message=f"optional input '{t.name}': Triton's onnxruntime backend does not allow "
                        "optional inputs on a model with max_batch_size > 0",
                        at=f"{at}.optional",
                    )
                )
            value = graph.get(t.name)
            if value is None:
                out.append(
                    Finding(
                        severity="error",
                        code="onnx-tensor-missing",
                        message=f"{kind} '{t.name}' is not an {kind} of {filename} "
                        f"(graph {kind}s: {', '.join(sorted(graph)) or 'none'})",
                        at=f"{at}.name",
                    )
                )
                continue
            out.extend(_dtype(kind, t, value, at=at, filename=filename))
            if check_dims and value.shape is not None and not (kind == "output" and t.name in batch_targets):
                out.extend(_dims(kind, t, value, mbs=mbs, at=at, filename=filename))
    out.extend(_control_findings(cfg, io, controls, filename=filename))
    return out


def _dtype(kind: str, t: Any, value: OnnxValue, *, at: str, filename: str) -> list[Finding]:
    config_type = data_type_name(t.data_type)
    if t.data_type == 0 or (config_type == "BF16" and value.elem_type == 16):
        return []  # unset (config_rules says so) / BF16 support depends on the backend build
    if config_type == value.triton_type:
        return []
    return [
        Finding(
            severity="error",
            code="onnx-data-type",
            message=f"{kind} '{t.name}' is TYPE_{'STRING' if config_type == 'BYTES' else config_type} in the "
            f"config but {value.type_name} in {filename}",
            at=f"{at}.data_type",
        )
    ]


def _dims(kind: str, t: Any, value: OnnxValue, *, mbs: int, at: str, filename: str) -> list[Finding]:
    model = value.shape or ()
    dims, field = _config_shape(t)
    label = f"{kind} '{t.name}'"
    if kind == "input" and t.allow_ragged_batch:
        if model != (-1,):
            return [
                Finding(
                    severity="error",
                    code="onnx-shape",
                    message=f"{label} allows ragged batches, so {filename} must take it as shape [-1], "
                    f"but it declares {_shape(model)}",
                    at=f"{at}.allow_ragged_batch",
                )
            ]
        return []
    if not model:  # a scalar in the graph: every configured dim must be 1
        if any(d != 1 for d in dims):
            return [
                Finding(
                    severity="error",
                    code="onnx-shape",
                    message=f"{label} is a scalar in {filename}, so its {field} may only contain 1s, "
                    f"got {_shape(dims)}",
                    at=f"{at}.{field}",
                )
            ]
        return []
    if mbs > 0:
        if model[0] != -1:
            return [
                Finding(
                    severity="error",
                    code="onnx-batch-dim",
                    message=f"max_batch_size is {mbs}, so Triton adds a batch dimension in front of {label}, "
                    f"but {filename} declares a fixed first dimension {_shape(model)}; set max_batch_size: 0 "
                    f"with dims {_shape(model)}, or export the model with a dynamic first dimension",
                    at=at,
                )
            ]
        full = (-1, *dims)
    else:
        full = dims
    exact = kind == "output"
    if len(full) == len(model):
        bad = [i for i, (m, c) in enumerate(zip(model, full, strict=True)) if m != c and (exact or m != -1)]
        if not bad:
            return []
        if exact and all(model[i] == -1 for i in bad):
            return [
                Finding(
                    severity="warning",
                    code="onnx-shape-unverified",
                    message=f"{label}: {filename} declares {_shape(model)} and the config {_shape(full)}; "
                    "Triton's onnxruntime backend compares output shapes exactly, so this loads only if "
                    "onnxruntime's shape inference resolves the symbolic dims; use -1 in the config to match",
                    at=f"{at}.{field}",
                )
            ]
    if mbs > 0 and dims and dims[0] == -1 and len(dims) == len(model):
        message = (
            f"{label}: {field} {_shape(dims)} include the batch dimension, but with max_batch_size {mbs} "
            f"Triton adds it itself (making {_shape(full)} against {_shape(model)} in {filename}); "
            f"write {field}: {_shape(dims[1:])}"
        )
    elif mbs == 0 and len(model) == len(dims) + 1 and model[0] == -1:
        message = (
            f"{label}: {filename} declares {_shape(model)}, a batch dimension plus {_shape(model[1:])}, "
            f"but the config gives {_shape(dims)} with max_batch_size 0; set max_batch_size > 0, or "
            f"write {field}: {_shape(model)}"
        )
    else:
        what = f"{field} {_shape(dims)}" + (" after the batch dimension" if mbs > 0 else "")
        rule = "exactly (outputs)" if exact else "(-1 in the model matches any size)"
        message = (
            f"{label}: the config shape {_shape(full)} ({what}) does not match {_shape(model)} in "
            f"{filename}; Triton compares ranks and dims {rule}"
        )
    return [Finding(severity="error", code="onnx-shape", message=message, at=f"{at}.{field}")]


def _control_findings(
    cfg: ModelConfig, io: OnnxIO, controls: list[tuple[int, int, str, str]], *, filename: str
) -> list[Finding]:
    out: list[Finding] = []
    graph = {v.name: v for v in io.inputs}
    for i, j, name, dtype in controls:
        at = f"sequence_batching.control_input[{i}]"
        value = graph.get(name)
        if value is None:
            out.append(
                Finding(
                    severity="error",
                    code="onnx-tensor-missing",
                    message=f"sequence control '{name}' is not an input of {filename} "
                    f"(graph inputs: {', '.join(sorted(graph)) or 'none'})",
                    at=f"{at}.name",
                )
            )
            continue
        if value.triton_type != dtype and dtype != "INVALID":
            out.append(
                Finding(
                    severity="error",
                    code="onnx-data-type",
                    message=f"sequence control '{name}' carries TYPE_{dtype} but {filename} takes "
                    f"{value.type_name}",
                    at=f"{at}.control[{j}]",
                )
            )
        if value.shape is not None:
            debatched = value.shape[1:] if cfg.max_batch_size > 0 else value.shape
            if debatched != (1,):
                out.append(
                    Finding(
                        severity="error",
                        code="onnx-shape",
                        message=f"sequence control '{name}' must have dims [1] (after the batch dimension) "
                        f"in {filename}, which declares {_shape(value.shape)}",
                        at=f"{at}.name",
                    )
                )
    return out


# -- TorchScript --------------------------------------------------------------------------------


def _named_index(name: str) -> int | None:
    """The index of a ``<name>__<index>`` tensor name as the PyTorch backend parses it, else None."""
    pos = name.find("__")
    if pos < 0:
        return None
    rest = name[pos + 2 :]
    if not rest.isdigit() and rest != "":
        return None
    return int(rest) if rest else 0


def torchscript_findings(cfg: ModelConfig) -> list[Finding]:
    """The PyTorch backend's load-time naming/shape rules that need no model file."""
    out: list[Finding] = []
    for i, ci in enumerate(cfg.sequence_batching.control_input if cfg.HasField("sequence_batching") else ()):
        if _named_index(ci.name) is None:
            out.append(
                Finding(
                    severity="error",
                    code="torchscript-naming",
                    message=f"sequence control '{ci.name}' must follow the <name>__<index> convention "
                    "(e.g. START__2) for the PyTorch backend",
                    at=f"sequence_batching.control_input[{i}].name",
                )
            )
    batching = cfg.max_batch_size > 0
    for kind, tensors in (("input", cfg.input), ("output", cfg.output)):
        if not tensors:
            # the PyTorch backend does not auto-complete: TorchScript keeps no I/O metadata
            out.append(
                Finding(
                    severity="error",
                    code="torchscript-io-missing",
                    message=f"the config declares no {kind}; the PyTorch backend cannot auto-complete them "
                    f"and refuses a model without at least one {kind}",
                    at=None,
                )
            )
        for i, t in enumerate(tensors):
            dims, field = _config_shape(t)
            if data_type_name(t.data_type) == "BYTES" and len(dims) + (1 if batching else 0) > 1:
                out.append(
                    Finding(
                        severity="error",
                        code="torchscript-string-dims",
                        message=f"{kind} '{t.name}': the PyTorch backend only supports a 1-dimensional "
                        f"list of strings, but {field} {_shape(dims)}"
                        + (" plus the batch dimension" if batching else "")
                        + " has more",
                        at=f"{kind}[{i}].{field}",
                    )
                )
        indexed = [_named_index(t.name) for t in tensors]
        if not tensors or all(ix is None for ix in indexed):
            continue
        who = "forward()'s arguments" if kind == "input" else "the tensors forward() returns"
        if any(ix is None for ix in indexed):
            plain = [t.name for t, ix in zip(tensors, indexed, strict=True) if ix is None]
            out.append(
                Finding(
                    severity="warning",
                    code="torchscript-naming",
                    message=f"some {kind}s follow the <name>__<index> convention and {', '.join(plain)} "
                    f"do{'es' if len(plain) == 1 else ''} not, so Triton maps {kind}s to {who} by their "
                    "order in this config"
                    + (" (unless every name is a forward() argument name)" if kind == "input" else ""),
                    at=f"{kind}[{indexed.index(None)}].name",
                )
            )
        elif sorted(ix for ix in indexed if ix is not None) != list(range(len(tensors))):
            out.append(
                Finding(
                    severity="warning",
                    code="torchscript-naming",
                    message=f"{kind} names index {who} as {sorted(ix for ix in indexed if ix is not None)}, "
                    f"but {len(tensors)} {kind}(s) need the indices 0..{len(tensors) - 1} exactly once",
                    at=f"{kind}[0].name",
                )
            )
    return out


# -- Python -------------------------------------------------------------------------------------


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


def python_findings(cfg: ModelConfig, path: Path, *, display: str, model: str) -> list[Problem]:
    """Literal tensor names a model.py reads/builds that the config does not declare (warnings).

    The source is parsed with ``ast``, never imported. Names computed at run time are not seen,
    so the verdict is a warning. A model that sends BLS requests builds tensors for other
    models too, so its built names are not checked.
    """

    def problem(severity: Severity, code: str, line: int | None, message: str) -> Problem:
        return Problem(severity=severity, model=model, file=display, line=line, code=code, message=message)

    try:
        source = path.read_bytes()
        tree = ast.parse(source, filename=str(path))
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
                "fails every request (\"is using the decoupled mode and the execute function must "
                "return None\"): send them with request.get_response_sender() and return None",
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
        for name, line in names.reads:
            if name not in inputs:
                out.append(
                    problem(
                        "warning",
                        "python-tensor-unknown",
                        line,
                        f"model.py reads input '{name}', which the config does not declare "
                        f"(inputs: {', '.join(sorted(t.name for t in cfg.input))}); "
                        "the request will not carry it",
                    )
                )
    outputs = {t.name for t in cfg.output} | names.autocomplete_names
    if cfg.HasField("sequence_batching"):
        outputs |= {s.output_name for s in cfg.sequence_batching.state}
    if cfg.output and not names.bls:
        for name, line in names.builds:
            if name not in outputs:
                out.append(
                    problem(
                        "warning",
                        "python-tensor-unknown",
                        line,
                        f"model.py returns a tensor named '{name}', which is not a config output "
                        f"(outputs: {', '.join(sorted(t.name for t in cfg.output))}); clients asking for the "
                        "config's outputs will not get it",
                    )
                )
    return out
