"""The gRPC side of a streamed (decoupled) inference: the ``ModelInferRequest`` we send on
``ModelStreamInfer`` and each ``ModelStreamInferResponse`` read back as a ``StreamResponse``.

The wire format is described in ``_stream``; this module holds only what touches Triton's gRPC
messages (built with tritonclient's generated protobuf classes, imported when first needed). A
response's outputs are decoded when read, and a text output straight from its raw BYTES, so the
OpenAI front's relay pays per token only for what it reads. No I/O here.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tritonkit.client._inputs import PreparedInput
from tritonkit.client._stream import EMPTY_FINAL_PARAM, FINAL_PARAM, ParamValue, StreamResponse
from tritonkit.errors import StreamError

__all__ = ["decode_grpc_response", "grpc_request"]


def grpc_request(
    model: str,
    inputs: Sequence[PreparedInput],
    *,
    version: str = "",
    outputs: Sequence[str] = (),
    request_id: str = "",
    parameters: Mapping[str, ParamValue] | None = None,
) -> Any:
    """A ``ModelInferRequest`` asking for the flags-only final response (so the end is seen)."""
    from tritonclient.grpc import service_pb2
    from tritonclient.utils import serialize_byte_tensor

    request = service_pb2.ModelInferRequest(model_name=model, model_version=version, id=request_id)
    for p in inputs:
        tensor = request.inputs.add()
        tensor.name = p.name
        tensor.datatype = p.datatype
        tensor.shape.extend(int(d) for d in p.array.shape)
        if p.datatype == "BYTES":
            serialized = serialize_byte_tensor(p.array)
            raw = serialized.item() if serialized.size > 0 else b""
        else:
            raw = np.ascontiguousarray(p.array).tobytes()
        request.raw_input_contents.append(raw)
    for name in outputs:
        request.outputs.add().name = name
    for key, value in (parameters or {}).items():
        _set_param(request.parameters[key], value)
    request.parameters[EMPTY_FINAL_PARAM].bool_param = True
    return request


def _set_param(param: Any, value: ParamValue) -> None:
    if isinstance(value, bool):
        param.bool_param = value
    elif isinstance(value, int):
        param.int64_param = value
    elif isinstance(value, float):
        param.double_param = value
    else:
        param.string_param = str(value)


def _param_value(param: Any) -> ParamValue:
    kind = param.WhichOneof("parameter_choice")
    value: ParamValue = getattr(param, kind) if kind else ""
    return value


_LENGTH = struct.Struct("<I")


def _bytes_items(raw: bytes) -> list[bytes]:
    """Triton's BYTES wire form (4-byte little-endian length, then the bytes; repeated) split
    into its elements (what tritonclient's ``deserialize_bytes_tensor`` reads, in one pass)."""
    items: list[bytes] = []
    offset, end, unpack = 0, len(raw), _LENGTH.unpack_from
    while offset < end:
        (size,) = unpack(raw, offset)
        offset += 4
        items.append(raw[offset : offset + size])
        offset += size
    return items


class _GrpcOutputs(Mapping[str, NDArray[Any]]):
    """The outputs of a ModelInferResponse, each decoded to numpy when first read, as
    tritonclient's ``InferResult.as_numpy`` reads them (raw contents when there are, else
    ``contents.bytes_contents``); :meth:`text` reads a BYTES output as text with no numpy.

    Lazy because a streamed response is often one short piece of text read once: building its
    arrays up front was most of the client's own cost per token (py-spy, OpenAI front, issue #40).
    """

    __slots__ = ("_arrays", "_index", "_response")

    def __init__(self, response: Any) -> None:
        self._response = response
        index: dict[str, int] = {}
        for i, output in enumerate(response.outputs):
            index.setdefault(output.name, i)  # a repeated name: the first, as before
        self._index = index
        self._arrays: dict[str, NDArray[Any]] = {}

    def __getitem__(self, name: str) -> NDArray[Any]:
        array = self._arrays.get(name)
        if array is None:
            array = self._arrays[name] = self._decode(self._index[name])
        return array

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def _decode(self, index: int) -> NDArray[Any]:
        from tritonclient.utils import triton_to_np_dtype

        output = self._response.outputs[index]
        raws = self._response.raw_output_contents
        datatype = output.datatype
        if index < len(raws):
            if datatype == "BYTES":
                array: NDArray[Any] = np.array(_bytes_items(raws[index]), dtype=np.object_)
            else:
                array = np.frombuffer(raws[index], dtype=triton_to_np_dtype(datatype))
        elif len(output.contents.bytes_contents) != 0:
            array = np.array(output.contents.bytes_contents)
        else:
            array = np.empty(0, dtype=triton_to_np_dtype(datatype))
        return array.reshape(tuple(output.shape))

    def text(self, name: str) -> str | None:
        """A BYTES output sent as raw contents, decoded as UTF-8 and joined; None otherwise."""
        index = self._index[name]
        raws = self._response.raw_output_contents
        if index >= len(raws) or self._response.outputs[index].datatype != "BYTES":
            return None
        raw: bytes = raws[index]
        if len(raw) >= 4 and _LENGTH.unpack_from(raw)[0] == len(raw) - 4:  # one element: the usual
            return raw[4:].decode("utf-8", "replace")
        return "".join(v.decode("utf-8", "replace") for v in _bytes_items(raw))


def _grpc_parameters(params: Any) -> dict[str, ParamValue]:
    """The response parameters the model set (Triton's own ``triton_*`` left out)."""
    if len(params) == (FINAL_PARAM in params):  # only Triton's end flag: the usual streamed piece
        return {}
    return {k: _param_value(v) for k, v in params.items() if not k.startswith("triton_")}


def decode_grpc_response(message: Any, *, index: int) -> StreamResponse | None:
    """One ``ModelStreamInferResponse``: a StreamResponse, None for a flags-only final response,
    or StreamError when it carries an error. Check ``final`` on the result to stop reading."""
    if message.error_message:
        raise StreamError(message.error_message)
    response = message.infer_response
    params = response.parameters
    final = FINAL_PARAM in params and bool(params[FINAL_PARAM].bool_param)
    if final and not response.outputs:
        return None
    # A response without outputs that is not the end: keep it (the model sent it).
    return StreamResponse(
        outputs=_GrpcOutputs(response),
        index=index,
        final=final,
        request_id=response.id,
        model=response.model_name,
        version=response.model_version,
        parameters=_grpc_parameters(params),
    )
