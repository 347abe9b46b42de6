"""ONNX graph I/O checked against its config, as Triton's native onnxruntime backend checks it.

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

from typing import Any

from tritonkit.config import ModelConfig, data_type_name
from tritonkit.repository.onnx_io import OnnxIO, OnnxValue
from tritonkit.repository.validator.findings import Finding
from tritonkit.repository.validator.findings import config_shape as _config_shape
from tritonkit.repository.validator.findings import shape_text as _shape

__all__ = ["onnx_findings"]

_CONTROL_KINDS = ("CONTROL_SEQUENCE_START", "CONTROL_SEQUENCE_END", "CONTROL_SEQUENCE_READY")


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
