"""perf's gRPC stream sender against a real grpc.aio server speaking Triton's ModelStreamInfer.

The server is in this process (grpc's own server, Triton's own protobuf messages): it answers
each request with one final response carrying an output, as a decoupled model does.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest

grpc = pytest.importorskip("grpc")
service_pb2 = pytest.importorskip("tritonclient.grpc.service_pb2")

from tritonkit.perf._stream_sender import StreamSender  # noqa: E402
from tritonkit.perf._target import Target  # noqa: E402

METHOD = "/inference.GRPCInferenceService/ModelStreamInfer"


async def _model_stream_infer(requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
    async for request in requests:
        await asyncio.sleep(0.001)  # read slowly: the client's writes wait on HTTP/2 flow control
        response = service_pb2.ModelStreamInferResponse()
        response.infer_response.id = request.id
        response.infer_response.model_name = request.model_name
        out = response.infer_response.outputs.add()
        out.name, out.datatype = "OUT", "INT32"
        out.shape.append(1)
        response.infer_response.raw_output_contents.append(np.int32(7).tobytes())
        response.infer_response.parameters["triton_final_response"].bool_param = True
        yield response


@pytest.fixture
async def stream_server() -> AsyncIterator[str]:
    server = grpc.aio.server(
        options=[("grpc.max_receive_message_length", 8 << 20), ("grpc.max_send_message_length", 8 << 20)]
    )
    handler = grpc.stream_stream_rpc_method_handler(
        _model_stream_infer,
        request_deserializer=service_pb2.ModelInferRequest.FromString,
        response_serializer=service_pb2.ModelStreamInferResponse.SerializeToString,
    )
    service = grpc.method_handlers_generic_handler(
        "inference.GRPCInferenceService", {"ModelStreamInfer": handler}
    )
    server.add_generic_rpc_handlers((service,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop(None)


async def test_concurrent_requests_sharing_one_grpc_stream_all_succeed(stream_server: str) -> None:
    """grpc.aio allows one write at a time on a call: two requests written at once on the shared
    stream failed the whole call (INTERNAL, GRPC_CALL_ERROR_TOO_MANY_OPERATIONS) and every request
    on it, which CI saw as 2 errors at concurrency 2 on a busy box. Large bodies make each write
    wait on flow control, so the writes of 8 concurrent requests overlap every time."""
    target = Target(
        client_url=stream_server, ssl=False, protocol="grpc", model="m", model_version="", outputs=()
    )
    payload = {"IN": np.zeros(256 * 1024, dtype=np.float32)}  # 1 MiB a request
    sender = StreamSender(target=dataclasses.replace(target, stream=True), requests=[payload], conn_limit=1)
    await sender.open()
    try:
        records = await asyncio.gather(*(sender.send() for _ in range(8)))
        records += await asyncio.gather(*(sender.send() for _ in range(8)))
    finally:
        await sender.close()
    assert [r[2] for r in records] == [None] * 16  # no error kind: every request answered
    assert all(r[3] is not None and r[3][2] == 1 for r in records)  # one output response each
