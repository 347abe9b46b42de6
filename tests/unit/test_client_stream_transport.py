"""The gRPC stream transport against a real in-process grpc server with Triton's method shape.

The server registers ``ModelStreamInfer`` as bidirectional (as Triton does) and reads the whole
request side before it answers: a client that left its request side open would hang here. That is
what the transport must not do: behind a gateway that refuses on the headers (nginx
``return 401``), a request side still open when the refusal comes makes nginx reset the stream
(RST_STREAM), and grpc then reports ``INTERNAL: Stream removed`` instead of the refusal.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import numpy as np
import pytest
from tritonclient.grpc import service_pb2

from tritonkit.client._stream_transport import AsyncStreamTransport, SyncStreamTransport
from tritonkit.client.endpoint import parse_url

FINAL = "triton_final_response"


class _Recorder:
    def __init__(self) -> None:
        self.requests: list[list[str]] = []  # request ids per call, read to the end of the side
        self.metadata: list[dict[str, str]] = []

    def stream(self, requests: Iterator[Any], context: grpc.ServicerContext) -> Iterator[Any]:
        got = [r.id for r in requests]  # blocks until the client ends its request side
        self.requests.append(got)
        self.metadata.append(dict(context.invocation_metadata()))
        for i in range(2):
            message = service_pb2.ModelStreamInferResponse()
            response = message.infer_response
            response.id = got[0]
            response.model_name = "pieces"
            response.outputs.add(name="INDEX", datatype="INT32", shape=[1])
            response.raw_output_contents.append(np.array([i], np.int32).tobytes())
            yield message
        last = service_pb2.ModelStreamInferResponse()
        last.infer_response.id = got[0]
        last.infer_response.parameters[FINAL].bool_param = True
        yield last


@pytest.fixture()
def server() -> Iterator[tuple[str, _Recorder]]:
    recorder = _Recorder()
    handler = grpc.method_handlers_generic_handler(
        "inference.GRPCInferenceService",
        {
            "ModelStreamInfer": grpc.stream_stream_rpc_method_handler(
                recorder.stream,
                request_deserializer=service_pb2.ModelInferRequest.FromString,
                response_serializer=service_pb2.ModelStreamInferResponse.SerializeToString,
            )
        },
    )
    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    srv.add_generic_rpc_handlers((handler,))
    port = srv.add_insecure_port("127.0.0.1:0")
    srv.start()
    try:
        yield f"grpc://127.0.0.1:{port}", recorder
    finally:
        srv.stop(None)


def _request(request_id: str) -> Any:
    return service_pb2.ModelInferRequest(model_name="pieces", id=request_id)


def test_sync_grpc_stream_sends_its_one_request_with_the_request_side_closed(
    server: tuple[str, _Recorder],
) -> None:
    url, recorder = server
    transport = SyncStreamTransport(parse_url(url, "grpc"), connect_timeout=5, cacert=None, insecure=False)
    try:
        call = transport.open_grpc(_request("r-1"), {"tk-key": "v"})
        got = []
        while (response := call.next(timeout=30)) is not None:
            got.append(int(response["INDEX"][0]))
    finally:
        transport.close()
    assert got == [0, 1]
    assert recorder.requests == [["r-1"]]
    assert recorder.metadata[0]["tk-key"] == "v"


def test_async_grpc_stream_sends_its_one_request_with_the_request_side_closed(
    server: tuple[str, _Recorder],
) -> None:
    url, recorder = server

    async def run() -> list[int]:
        transport = AsyncStreamTransport(
            parse_url(url, "grpc"), connect_timeout=5, cacert=None, insecure=False
        )
        try:
            call = await transport.open_grpc(_request("r-2"), None)
            got = []
            while (response := await call.next(timeout=30)) is not None:
                got.append(int(response["INDEX"][0]))
            return got
        finally:
            await transport.close()

    assert asyncio.run(run()) == [0, 1]
    assert recorder.requests == [["r-2"]]
