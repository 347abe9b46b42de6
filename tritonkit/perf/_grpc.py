"""The gRPC pieces both load-generator senders send with: channels to the target and requests
encoded once, up front. One of the raw senders' modules that talk tritonclient's wire types."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

from tritonkit.errors import PerfError
from tritonkit.perf.inputs import Array

__all__ = ["grpc_channels", "grpc_infer_request"]


class Target(Protocol):
    """What of :class:`tritonkit.perf._target.Target` the gRPC pieces read."""

    @property
    def client_url(self) -> str: ...
    @property
    def ssl(self) -> bool: ...
    @property
    def cacert(self) -> str | None: ...
    @property
    def grpc_channels(self) -> int: ...
    @property
    def model(self) -> str: ...
    @property
    def model_version(self) -> str: ...
    @property
    def outputs(self) -> tuple[str, ...]: ...


def grpc_channels(target: Target) -> list[Any]:
    """``target.grpc_channels`` grpc.aio channels to the target (TLS with its CA when it has one).

    Several connections: one HTTP/2 connection for all requests serializes them through one
    transport; measured +15-20% saturated throughput with a connection per worker.
    """
    import grpc

    options = [
        ("grpc.max_send_message_length", 2**31 - 1),
        ("grpc.max_receive_message_length", 2**31 - 1),
        ("grpc.use_local_subchannel_pool", 1),
    ]
    creds = None
    if target.ssl:
        root = None
        if target.cacert:
            try:
                with open(target.cacert, "rb") as fh:
                    root = fh.read()
            except OSError as exc:
                raise PerfError(f"--cacert {target.cacert}: cannot read it: {exc}") from exc
        creds = grpc.ssl_channel_credentials(root_certificates=root)
    channels: list[Any] = []
    for _ in range(max(1, target.grpc_channels)):
        if creds is not None:
            channels.append(grpc.aio.secure_channel(target.client_url, creds, options=options))
        else:
            channels.append(grpc.aio.insecure_channel(target.client_url, options=options))
    return channels


def grpc_infer_request(target: Target, request: Mapping[str, Array]) -> Any:
    """One ``ModelInferRequest`` for ``request``, tensors as raw contents (encoded once, up front)."""
    from tritonclient.grpc import service_pb2
    from tritonclient.utils import np_to_triton_dtype, serialize_byte_tensor

    msg = service_pb2.ModelInferRequest(model_name=target.model, model_version=target.model_version)
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
    for name in target.outputs:
        msg.outputs.add().name = name
    return msg
