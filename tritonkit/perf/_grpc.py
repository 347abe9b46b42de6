"""The gRPC request both load-generator senders send: encoded once, up front (channels come from
:func:`tritonkit.client.connection.grpc_channels`). One of the raw senders' modules that talk
tritonclient's wire types."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tritonkit.perf.inputs import Array

__all__ = ["grpc_infer_request"]


def grpc_infer_request(
    request: Mapping[str, Array], *, model: str, model_version: str, outputs: Sequence[str]
) -> Any:
    """One ``ModelInferRequest`` for ``request``, tensors as raw contents (encoded once, up front)."""
    from tritonclient.grpc import service_pb2
    from tritonclient.utils import np_to_triton_dtype, serialize_byte_tensor

    msg = service_pb2.ModelInferRequest(model_name=model, model_version=model_version)
    for name, arr in request.items():
        tensor = msg.inputs.add()
        tensor.name = name
        tensor.datatype = np_to_triton_dtype(arr.dtype)
        tensor.shape.extend(int(d) for d in arr.shape)
        if arr.dtype == np.object_:
            serialized = serialize_byte_tensor(arr)
            msg.raw_input_contents.append(serialized.item() if serialized.size > 0 else b"")
        else:
            msg.raw_input_contents.append(np.ascontiguousarray(arr).tobytes())
    for name in outputs:
        msg.outputs.add().name = name
    return msg
