"""Auto-config from ONNX files: tensor names, data types and dims via the ``onnx`` package.

A dynamic leading dimension on every input and output is Triton's batch dimension: the model
gets ``max_batch_size > 0`` and that dimension is stripped from ``dims``. Any other symbolic
or unknown dimension becomes -1.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritonkit.config import DataType, TensorSpec
from tritonkit.errors import ModelImportError

__all__ = ["DEFAULT_MAX_BATCH_SIZE", "OnnxSignature", "read_onnx_signature", "signature_from_bytes"]

#: max_batch_size given to an ONNX model with a dynamic batch dimension when the spec names none.
DEFAULT_MAX_BATCH_SIZE = 8

# onnx.TensorProto.DataType numbers -> Triton data types.
_ONNX_TYPES: dict[int, DataType] = {
    1: DataType.FP32,
    2: DataType.UINT8,
    3: DataType.INT8,
    4: DataType.UINT16,
    5: DataType.INT16,
    6: DataType.INT32,
    7: DataType.INT64,
    8: DataType.BYTES,
    9: DataType.BOOL,
    10: DataType.FP16,
    11: DataType.FP64,
    12: DataType.UINT32,
    13: DataType.UINT64,
    16: DataType.BF16,
}


@dataclass(frozen=True, kw_only=True)
class OnnxTensor:
    name: str
    data_type: DataType
    shape: tuple[int, ...]  # -1 for symbolic/unknown dims
    leading_dynamic: bool


@dataclass(frozen=True, kw_only=True)
class OnnxSignature:
    """The inputs and outputs an ONNX graph declares."""

    source: str
    inputs: tuple[OnnxTensor, ...]
    outputs: tuple[OnnxTensor, ...]

    @property
    def batchable(self) -> bool:
        """True when every input and output has a dynamic leading dimension."""
        tensors = self.inputs + self.outputs
        return bool(tensors) and all(t.leading_dynamic for t in tensors)

    def tensors(self, *, max_batch_size: int) -> tuple[tuple[TensorSpec, ...], tuple[TensorSpec, ...]]:
        """Triton inputs/outputs for ``max_batch_size`` (> 0 strips the batch dimension)."""
        if max_batch_size > 0 and not self.batchable:
            fixed = [t.name for t in self.inputs + self.outputs if not t.leading_dynamic]
            raise ModelImportError(
                f"{self.source}: max_batch_size is {max_batch_size} but tensor(s) {', '.join(fixed)} "
                "have a fixed leading dimension, so the model cannot batch",
                hint="set max_batch_size: 0, or export the model with a dynamic first dimension",
            )

        def convert(t: OnnxTensor) -> TensorSpec:
            dims = t.shape[1:] if max_batch_size > 0 else t.shape
            if not dims:
                # Triton needs at least one dim; a per-item scalar is [1] reshaped to [].
                return TensorSpec(name=t.name, data_type=t.data_type, dims=(1,), reshape=())
            return TensorSpec(name=t.name, data_type=t.data_type, dims=dims)

        return tuple(convert(t) for t in self.inputs), tuple(convert(t) for t in self.outputs)


def read_onnx_signature(path: str | Path) -> OnnxSignature:
    """Read an ONNX file's signature; ModelImportError names the file when it is not ONNX."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ModelImportError(f"{p}: cannot read ONNX file: {exc.strerror}") from exc
    return signature_from_bytes(data, source=str(p))


def signature_from_bytes(data: bytes, *, source: str) -> OnnxSignature:
    import onnx

    try:
        model = onnx.load_model_from_string(data)
    except Exception as exc:  # onnx raises protobuf DecodeError and others for corrupt files
        raise ModelImportError(
            f"{source}: not a valid ONNX model ({type(exc).__name__}: {exc})",
            hint="re-export the model, or check the file was not truncated",
        ) from exc
    graph = model.graph
    if not graph.output:
        raise ModelImportError(
            f"{source}: not a valid ONNX model (the graph declares no outputs)",
            hint="re-export the model, or check the file was not truncated",
        )
    initializers = {init.name for init in graph.initializer}
    inputs = tuple(_tensor(v, source) for v in graph.input if v.name not in initializers)
    outputs = tuple(_tensor(v, source) for v in graph.output)
    return OnnxSignature(source=source, inputs=inputs, outputs=outputs)


def _tensor(value: Any, source: str) -> OnnxTensor:
    ttype = value.type
    if not ttype.HasField("tensor_type"):
        raise ModelImportError(
            f"{source}: graph value '{value.name}' is not a tensor (sequences and maps are not supported)",
            hint="declare inputs/outputs in the spec or wrap the model",
        )
    elem = ttype.tensor_type.elem_type
    dtype = _ONNX_TYPES.get(elem)
    if dtype is None:
        raise ModelImportError(
            f"{source}: tensor '{value.name}' has ONNX element type {elem}, which Triton does not support"
        )
    shape: list[int] = []
    leading_dynamic = False
    if ttype.tensor_type.HasField("shape"):
        for i, dim in enumerate(ttype.tensor_type.shape.dim):
            known = dim.HasField("dim_value") and dim.dim_value > 0
            shape.append(int(dim.dim_value) if known else -1)
            if i == 0:
                leading_dynamic = not known
    else:
        raise ModelImportError(
            f"{source}: tensor '{value.name}' has no shape information",
            hint="declare the tensor's dims in the spec (inputs:/outputs:)",
        )
    return OnnxTensor(name=value.name, data_type=dtype, shape=tuple(shape), leading_dynamic=leading_dynamic)
