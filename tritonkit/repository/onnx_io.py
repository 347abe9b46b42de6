"""Read only the graph inputs/outputs of an ONNX file, straight from the protobuf wire format.

The validator must not load a model's weights to compare names, data types and dims: an ONNX
file can be gigabytes, keep its weights in external files, or not be ONNX at all. This reader
walks ``ModelProto.graph`` and keeps only what Triton's onnxruntime backend compares at load
time: ``graph.input``/``graph.output`` value infos and the *names* of initializers (an input
that is also an initializer is an overridable initializer, not a required input). Initializer
payloads are skipped by their length prefix, never copied; large files are memory-mapped.

It needs no ``onnx`` package and never raises anything but :class:`OnnxReadError`, whatever
the bytes are (property-tested on arbitrary input).
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tritonkit.errors import ModelImportError

__all__ = ["OnnxIO", "OnnxReadError", "OnnxValue", "read_onnx_io", "read_onnx_io_bytes"]

#: ONNX TensorProto.DataType -> Triton data type name (without TYPE_); others have no Triton type
ONNX_TO_TRITON = {
    1: "FP32", 2: "UINT8", 3: "INT8", 4: "UINT16", 5: "INT16", 6: "INT32", 7: "INT64",
    8: "BYTES", 9: "BOOL", 10: "FP16", 11: "FP64", 12: "UINT32", 13: "UINT64", 16: "BF16",
}  # fmt: skip
#: names of the other ONNX element types, for messages
ONNX_TYPE_NAMES = {
    0: "UNDEFINED", 14: "COMPLEX64", 15: "COMPLEX128", 17: "FLOAT8E4M3FN",
    18: "FLOAT8E4M3FNUZ", 19: "FLOAT8E5M2", 20: "FLOAT8E5M2FNUZ", 21: "UINT4", 22: "INT4",
}  # fmt: skip

_MMAP_FROM = 16 * 1024 * 1024
_MAX_DIMS = 4096


class OnnxReadError(ModelImportError):
    """The bytes are not a readable ONNX model (says why): an unreadable model file."""


@dataclass(frozen=True, kw_only=True)
class OnnxValue:
    """One graph input/output as onnxruntime reports it.

    ``shape`` is None when the file declares no shape; symbolic or unknown dims are -1.
    ``elem_type`` is the ONNX element type number, ``kind`` is "tensor" or another TypeProto kind.
    """

    name: str
    kind: str
    elem_type: int
    shape: tuple[int, ...] | None

    @property
    def triton_type(self) -> str | None:
        return ONNX_TO_TRITON.get(self.elem_type)

    @property
    def type_name(self) -> str:
        return ONNX_TO_TRITON.get(self.elem_type) or ONNX_TYPE_NAMES.get(
            self.elem_type, f"ONNX type {self.elem_type}"
        )


@dataclass(frozen=True, kw_only=True)
class OnnxIO:
    """The graph's request inputs, overridable initializers and outputs."""

    ir_version: int
    inputs: tuple[OnnxValue, ...]
    initializer_inputs: tuple[OnnxValue, ...]
    outputs: tuple[OnnxValue, ...]

    @property
    def batchable(self) -> bool:
        """onnxruntime backend's AutoCompleteMaxBatch: every I/O has a variable first dim."""
        return all(v.shape is not None and v.shape and v.shape[0] == -1 for v in self.inputs + self.outputs)


def read_onnx_io(path: str | Path) -> OnnxIO:
    """Read the graph I/O of ``path`` (a file, or a directory holding ``model.onnx``)."""
    p = Path(path)
    try:
        if p.is_dir():
            p = p / "model.onnx"
        if p.exists() and not p.is_file():
            raise OnnxReadError("not a regular file")  # a FIFO or device would block or never end
        with open(p, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size < _MMAP_FROM:
                return read_onnx_io_bytes(fh.read())
            message = ""
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                try:
                    return read_onnx_io_bytes(memoryview(mapped))
                except OnnxReadError as exc:
                    # leave the except block before the map closes: the traceback's frames hold
                    # views into it, and closing a map with live views raises BufferError
                    message = str(exc)
            raise OnnxReadError(message)
    except OSError as exc:
        raise OnnxReadError(f"cannot read the file: {exc.strerror or exc}") from exc
    except ValueError as exc:  # mmap of an empty or special file
        raise OnnxReadError(f"cannot map the file: {exc}") from exc


def read_onnx_io_bytes(data: bytes | memoryview) -> OnnxIO:
    buf = memoryview(data)
    ir_version = 0
    graphs: list[memoryview] = []
    for field, wire, value in _fields(buf):
        if field == 1 and wire == 0:
            ir_version = int(value) if isinstance(value, int) else 0
        elif field == 7:
            graphs.append(_as_bytes(value, wire, "ModelProto.graph"))
    if not graphs:
        raise OnnxReadError("no graph found (not an ONNX model, or the file is truncated)")
    raw_inputs: list[memoryview] = []
    raw_outputs: list[memoryview] = []
    initializers: set[str] = set()
    for graph in graphs:
        for field, wire, value in _fields(graph):
            if field == 11:
                raw_inputs.append(_as_bytes(value, wire, "GraphProto.input"))
            elif field == 12:
                raw_outputs.append(_as_bytes(value, wire, "GraphProto.output"))
            elif field == 5:
                initializers.add(_tensor_name(_as_bytes(value, wire, "GraphProto.initializer")))
            elif field == 15:
                sparse = _as_bytes(value, wire, "GraphProto.sparse_initializer")
                for sf, sw, sv in _fields(sparse):
                    if sf == 1:
                        initializers.add(_tensor_name(_as_bytes(sv, sw, "SparseTensorProto.values")))
    if not raw_outputs:
        raise OnnxReadError("the graph declares no outputs (not an ONNX model, or the file is truncated)")
    all_inputs = [_value_info(v) for v in raw_inputs]
    inputs = tuple(v for v in all_inputs if v.name not in initializers)
    # onnxruntime treats initializers listed as inputs as overridable only from IR version 4
    overridable = tuple(v for v in all_inputs if v.name in initializers) if ir_version >= 4 else ()
    outputs = tuple(_value_info(v) for v in raw_outputs)
    return OnnxIO(ir_version=ir_version, inputs=inputs, initializer_inputs=overridable, outputs=outputs)


# -- wire format ----------------------------------------------------------------------------


def _varint(buf: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise OnnxReadError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise OnnxReadError("malformed varint")


def _fields(buf: memoryview) -> Iterator[tuple[int, int, int | memoryview]]:
    """(field number, wire type, int or bytes view) for every field of one message."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        field, wire = key >> 3, key & 7
        if field == 0:
            raise OnnxReadError("field number 0")
        if wire == 0:
            value, pos = _varint(buf, pos)
            yield field, wire, value
        elif wire == 1:
            if pos + 8 > end:
                raise OnnxReadError("truncated fixed64")
            yield field, wire, int.from_bytes(buf[pos : pos + 8], "little")
            pos += 8
        elif wire == 2:
            length, pos = _varint(buf, pos)
            if pos + length > end:
                raise OnnxReadError("a length-delimited field runs past the end (truncated file?)")
            yield field, wire, buf[pos : pos + length]
            pos += length
        elif wire == 5:
            if pos + 4 > end:
                raise OnnxReadError("truncated fixed32")
            yield field, wire, int.from_bytes(buf[pos : pos + 4], "little")
            pos += 4
        else:
            raise OnnxReadError(f"unsupported protobuf wire type {wire}")


def _as_bytes(value: int | memoryview, wire: int, what: str) -> memoryview:
    if wire != 2 or not isinstance(value, memoryview):
        raise OnnxReadError(f"{what} has the wrong wire type")
    return value


def _text(value: int | memoryview, wire: int, what: str) -> str:
    raw = _as_bytes(value, wire, what)
    try:
        return bytes(raw).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise OnnxReadError(f"{what} is not UTF-8") from exc


def _tensor_name(buf: memoryview) -> str:
    name = ""
    for field, wire, value in _fields(buf):
        if field == 8:
            name = _text(value, wire, "TensorProto.name")
    return name


_TYPE_KINDS = {1: "tensor", 4: "sequence", 5: "map", 8: "sparse tensor", 9: "optional"}


def _value_info(buf: memoryview) -> OnnxValue:
    name = ""
    kind = "unknown"
    elem_type = 0
    shape: tuple[int, ...] | None = None
    for field, wire, value in _fields(buf):
        if field == 1:
            name = _text(value, wire, "ValueInfoProto.name")
        elif field == 2:
            for tf, tw, tv in _fields(_as_bytes(value, wire, "ValueInfoProto.type")):
                if tf in _TYPE_KINDS:
                    kind = _TYPE_KINDS[tf]
                if tf == 1:
                    elem_type, shape = _tensor_type(_as_bytes(tv, tw, "TypeProto.tensor_type"))
    return OnnxValue(name=name, kind=kind, elem_type=elem_type, shape=shape)


def _tensor_type(buf: memoryview) -> tuple[int, tuple[int, ...] | None]:
    elem_type = 0
    shape: list[int] | None = None
    for field, wire, value in _fields(buf):
        if field == 1 and wire == 0 and isinstance(value, int):
            elem_type = value
        elif field == 2:
            dims = shape if shape is not None else []
            for df, dw, dv in _fields(_as_bytes(value, wire, "TypeProto.Tensor.shape")):
                if df == 1:
                    dims.append(_dim(_as_bytes(dv, dw, "TensorShapeProto.dim")))
                    if len(dims) > _MAX_DIMS:
                        raise OnnxReadError("implausibly many dims")
            shape = dims
    return elem_type, tuple(shape) if shape is not None else None


def _dim(buf: memoryview) -> int:
    dim = -1  # dim_param or nothing: a symbolic/unknown dim, which onnxruntime reports as -1
    for field, wire, value in _fields(buf):
        if field == 1 and wire == 0 and isinstance(value, int):
            dim = value - (1 << 64) if value >= 1 << 63 else value  # int64 two's complement
        elif field == 2:
            dim = -1
    return dim
