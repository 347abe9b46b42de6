"""The wire pieces of streamed inference: SSE parsing, generate_stream bodies and events, gRPC
stream messages (real tritonclient protobufs), shapes, timeouts, and how failures are classified.

The integration tests (tests/integration/test_client_stream.py) run all of it on a real server.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tritonclient.grpc import service_pb2
from tritonclient.utils import InferenceServerException, serialize_byte_tensor

from tritonkit.client import TritonClient
from tritonkit.client._errors import CallContext, classify
from tritonkit.client._inputs import ModelInfo, PreparedInput, TensorInfo
from tritonkit.client._stream import (
    SseParser,
    StreamError,
    StreamResponse,
    StreamStats,
    StreamWaits,
    decode_sse_data,
    error_text,
    fit_shape,
    generate_body,
    next_wait,
    stream_path,
)
from tritonkit.client._stream_grpc import decode_grpc_response, grpc_request
from tritonkit.errors import (
    EndpointUnreachableError,
    InferenceError,
    InputMismatchError,
    RequestTimeoutError,
)

INFO = ModelInfo(
    name="gen",
    version="",
    max_batch_size=0,
    inputs=(TensorInfo("PROMPT", "BYTES", (1,)), TensorInfo("M", "FP32", (-1, -1))),
    outputs=(TensorInfo("TEXT", "BYTES", (1,)), TensorInfo("GRID", "FP32", (2, 3))),
    decoupled=True,
)


def lines(text: str) -> list[str]:
    return text.split("\n")


# -- SSE ----------------------------------------------------------------------------------------


def test_sse_parser_dispatches_on_blank_lines_and_joins_multiline_data() -> None:
    text = ': comment\ndata: {"a":\ndata:1}\n\nevent: note\nid: 7\ndata: x\n\ndata: cut off'
    events = list(SseParser().events(lines(text)))
    assert [(e.data, e.event, e.id) for e in events] == [('{"a":\n1}', "message", None), ("x", "note", "7")]


def test_sse_parser_drops_events_without_data() -> None:
    assert list(SseParser().events(lines("event: ping\n\nretry: 5\n\n"))) == []


@given(st.lists(st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=8), max_size=3)))
def test_sse_parser_returns_every_json_event_triton_writes(objects: list[dict[str, Any]]) -> None:
    # Triton writes each response as "data: <json>\n\n"; JSON never holds a raw newline.
    body = "".join(f"data: {json.dumps(o)}\n\n" for o in objects)
    assert [json.loads(e.data) for e in SseParser().events(lines(body))] == objects


# -- shapes -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dims", "count", "shape"),
    [
        ((-1,), 5, (5,)),
        ((2, 3), 6, (2, 3)),
        ((-1, 3), 6, (2, 3)),
        ((-1, -1), 6, (1, 6)),  # Triton: the innermost -1 takes all, the others 1
        ((-1, 2, 3), 12, (2, 2, 3)),
        ((4,), 6, None),
        ((), 1, ()),
        ((), 2, None),
        ((-1,), 0, (0,)),
    ],
)
def test_fit_shape_shapes_flat_values_like_triton_generate(
    dims: tuple[int, ...], count: int, shape: tuple[int, ...] | None
) -> None:
    assert fit_shape(dims, count) == shape


# -- generate_stream events ------------------------------------------------------------------------


def test_sse_event_becomes_numpy_outputs_with_the_model_shapes_and_parameters() -> None:
    data = json.dumps(
        {
            "TEXT": "héllo",
            "GRID": [1, 2, 3, 4, 5, 6],
            "id": "r1",
            "model_name": "gen",
            "model_version": "1",
            "tokens": 3,
            "triton_internal": True,
        }
    )
    r = decode_sse_data(data, INFO, index=4)
    assert r.text("TEXT") == "héllo"
    assert r["TEXT"].dtype == object and r["TEXT"][0] == "héllo".encode()
    assert r["GRID"].shape == (2, 3) and r["GRID"].dtype == np.float32 and r["GRID"][1, 0] == 4
    assert (r.index, r.request_id, r.model, r.version, r.final) == (4, "r1", "gen", "1", False)
    assert dict(r.parameters) == {"tokens": 3}


def test_sse_event_text_joins_strings_with_no_numpy_and_falls_back_for_other_values() -> None:
    r = decode_sse_data(json.dumps({"TEXT": ["ab", "c"], "GRID": [0] * 6}), INFO, index=0)
    assert r.outputs.text("TEXT") == "abc" and r.text("TEXT") == "abc"  # type: ignore[attr-defined]
    assert r.outputs.text("GRID") is None  # type: ignore[attr-defined]  # not BYTES: numpy's way
    numbers = decode_sse_data(json.dumps({"TEXT": [1, {"a": 2}]}), INFO, index=0)
    assert numbers.text("TEXT") == '1{"a": 2}'  # JSON values a BYTES output holds, as before
    assert list(numbers.outputs) == ["TEXT"] and len(numbers.outputs) == 1


def test_sse_event_keeps_only_wanted_outputs() -> None:
    r = decode_sse_data(json.dumps({"TEXT": "a", "GRID": [0] * 6}), INFO, index=0, wanted=["TEXT"])
    assert set(r.outputs) == {"TEXT"}


@pytest.mark.parametrize("data", ['{"error": "boom"}', "not json", "[1, 2]"])
def test_sse_error_or_garbage_event_raises_stream_error(data: str) -> None:
    with pytest.raises(StreamError):
        decode_sse_data(data, INFO, index=0)


def test_error_text_reads_json_and_event_stream_refusals() -> None:
    assert error_text(b'{"error":"unknown model"}', "application/json") == "unknown model"
    assert error_text(b'data: {"error":"piece 0 failed"}\n\n', "text/event-stream") == "piece 0 failed"
    assert error_text(b"Bad gateway", "text/html") == "Bad gateway"


def test_stream_path_escapes_names_and_adds_the_version() -> None:
    assert stream_path("a/b c") == "v2/models/a%2Fb%20c/generate_stream"
    assert stream_path("m", "2") == "v2/models/m/versions/2/generate_stream"


# -- generate_stream bodies -----------------------------------------------------------------------


def prompt(value: Any) -> PreparedInput:
    arr = np.empty(1, dtype=object)
    arr[0] = value
    return PreparedInput("PROMPT", "BYTES", arr)


def test_generate_body_carries_inputs_id_and_parameters() -> None:
    m = PreparedInput("M", "FP32", np.arange(3, dtype=np.float32).reshape(1, 3))
    body = json.loads(generate_body(INFO, [prompt(b"hi"), m], request_id="r9", parameters={"t": 0.5}))
    assert body == {"PROMPT": ["hi"], "M": [0.0, 1.0, 2.0], "id": "r9", "parameters": {"t": 0.5}}


@pytest.mark.parametrize(
    ("given_input", "words"),
    [
        (prompt(b"\xff\xfe"), "not UTF-8"),
        (PreparedInput("M", "FP32", np.array([[np.nan]], np.float32)), "NaN"),
        # Triton would read 6 flat values for dims [-1, -1] as [1, 6], not [2, 3]
        (PreparedInput("M", "FP32", np.zeros((2, 3), np.float32)), r"Triton would shape them \[1, 6\]"),
    ],
)
def test_generate_body_refuses_what_sse_cannot_carry_and_points_to_grpc(
    given_input: PreparedInput, words: str
) -> None:
    with pytest.raises(InputMismatchError, match=words) as caught:
        generate_body(INFO, [given_input])
    assert "grpc" in str(caught.value.hint)


# -- gRPC stream messages (real protobufs) ---------------------------------------------------------


def test_grpc_request_asks_for_the_empty_final_response_and_carries_everything() -> None:
    request = grpc_request(
        "gen",
        [prompt(b"hi"), PreparedInput("M", "FP32", np.ones((1, 2), np.float32))],
        version="3",
        outputs=["TEXT"],
        request_id="r1",
        parameters={"temperature": 0.5, "n": 2, "greedy": True, "tag": "x"},
    )
    assert (request.model_name, request.model_version, request.id) == ("gen", "3", "r1")
    assert [(t.name, t.datatype, list(t.shape)) for t in request.inputs] == [
        ("PROMPT", "BYTES", [1]),
        ("M", "FP32", [1, 2]),
    ]
    assert request.raw_input_contents[0] == serialize_byte_tensor(np.array([b"hi"], dtype=object)).item()
    assert request.raw_input_contents[1] == np.ones(2, np.float32).tobytes()
    assert [o.name for o in request.outputs] == ["TEXT"]
    assert request.parameters["triton_enable_empty_final_response"].bool_param is True
    assert request.parameters["temperature"].double_param == 0.5
    assert request.parameters["n"].int64_param == 2
    assert request.parameters["greedy"].bool_param is True
    assert request.parameters["tag"].string_param == "x"


def stream_message(text: str | None, *, final: bool, error: str = "") -> Any:
    message = service_pb2.ModelStreamInferResponse(error_message=error)
    response = message.infer_response
    response.model_name, response.model_version, response.id = "gen", "1", "r1"
    if text is not None:
        out = response.outputs.add()
        out.name, out.datatype = "TEXT", "BYTES"
        out.shape.extend([1])
        response.raw_output_contents.append(
            serialize_byte_tensor(np.array([text.encode()], dtype=object)).item()
        )
        response.parameters["tokens"].int64_param = 1
    response.parameters["triton_final_response"].bool_param = final
    return message


def test_grpc_response_decodes_outputs_final_flag_and_parameters() -> None:
    r = decode_grpc_response(stream_message("tok", final=True), index=2)
    assert isinstance(r, StreamResponse)
    assert (r.text("TEXT"), r.final, r.index, r.request_id, dict(r.parameters)) == (
        "tok",
        True,
        2,
        "r1",
        {"tokens": 1},
    )


def test_grpc_outputs_decode_when_read_as_tritonclient_reads_them() -> None:
    """Decoded on first read (lazily): BYTES of several elements, numbers, text() of each kind."""
    message = service_pb2.ModelStreamInferResponse()
    response = message.infer_response
    for name, datatype, shape in (("TEXT", "BYTES", [2]), ("N", "INT32", [1, 2]), ("EMPTY", "BYTES", [0])):
        out = response.outputs.add()
        out.name, out.datatype = name, datatype
        out.shape.extend(shape)
    response.raw_output_contents.append(
        serialize_byte_tensor(np.array(["héllo ".encode(), b"world"], dtype=object)).item()
    )
    response.raw_output_contents.append(np.array([[7, 8]], dtype=np.int32).tobytes())
    response.raw_output_contents.append(b"")
    r = decode_grpc_response(message, index=0)
    assert r is not None
    assert sorted(r.outputs) == ["EMPTY", "N", "TEXT"] and "TEXT" in r.outputs and "X" not in r.outputs
    assert r["TEXT"].tolist() == ["héllo ".encode(), b"world"] and r["TEXT"].shape == (2,)
    assert r["N"].tolist() == [[7, 8]] and r["N"].dtype == np.int32
    assert (r.text("TEXT"), r.text("N"), r.text("EMPTY")) == ("héllo world", "78", "")
    assert r["EMPTY"].shape == (0,) and dict(r.parameters) == {}
    with pytest.raises(KeyError):
        r.text("X")


def test_grpc_flags_only_final_response_is_the_end_not_a_piece() -> None:
    assert decode_grpc_response(stream_message(None, final=True), index=3) is None


def test_grpc_error_message_raises_stream_error() -> None:
    with pytest.raises(StreamError, match="out of memory"):
        decode_grpc_response(stream_message(None, final=False, error="out of memory"), index=0)


# -- failures and waits ---------------------------------------------------------------------------

CTX = CallContext("https://gw:443", "streamed inference on model 'gen'")


@pytest.mark.parametrize(
    ("exc", "kind", "retryable"),
    [
        (httpx.ConnectError("[Errno 111] Connection refused"), EndpointUnreachableError, True),
        (httpx.RemoteProtocolError("peer closed connection"), EndpointUnreachableError, True),
        (
            httpx.ConnectError("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"),
            EndpointUnreachableError,
            False,
        ),
        (httpx.ReadTimeout("timed out"), RequestTimeoutError, False),
        # what grpc reports when the connection under a stream drops (a gateway dying)
        (
            InferenceServerException("Stream removed (Socket closed)", status="StatusCode.UNAVAILABLE"),
            EndpointUnreachableError,
            True,
        ),
    ],
)
def test_stream_transport_failures_map_into_the_error_tree(
    exc: Exception, kind: type, retryable: bool
) -> None:
    failure = classify(exc, CTX)
    assert type(failure.error) is kind and failure.retryable is retryable


@pytest.mark.parametrize("status", ["501", "StatusCode.UNIMPLEMENTED"])
def test_triton_refusing_a_decoupled_model_on_a_unary_path_says_to_stream(status: str) -> None:
    exc = InferenceServerException(
        msg="HTTP end point doesn't support models with decoupled transaction policy", status=status
    )
    failure = classify(exc, CTX)
    assert isinstance(failure.error, InferenceError) and not failure.retryable
    assert "stream" in str(failure.error.hint)


def test_wait_is_first_then_gap_and_never_past_the_total() -> None:
    stats = StreamStats(started=time.monotonic())
    assert next_wait(stats, StreamWaits(5.0, 1.0, None)) == 5.0
    stats.record()
    assert next_wait(stats, StreamWaits(5.0, 1.0, None)) == 1.0
    assert next_wait(stats, StreamWaits(5.0, None, None)) is None
    stats.started -= 9.5
    assert next_wait(stats, StreamWaits(5.0, 1.0, 10.0)) == pytest.approx(0.5, abs=0.05)


def test_stats_rate_counts_responses_after_the_first() -> None:
    stats = StreamStats(started=0.0)
    for now in (0.1, 0.3, 0.5):
        stats.record(now)
    assert stats.time_to_first == pytest.approx(0.1)
    assert stats.rate == pytest.approx(5.0)


class _DroppingCall:
    """One response, then the connection drops. A fake: a real mid-stream drop needs a server
    killed at the right moment, which a unit test cannot arrange reliably."""

    def __init__(self) -> None:
        self.sent = 0
        self.cancelled = False

    def next(self, timeout: float | None) -> StreamResponse | None:
        self.sent += 1
        if self.sent == 1:
            return StreamResponse(outputs={"TEXT": np.array([b"a"], dtype=object)}, index=0)
        raise ConnectionResetError("connection reset by peer")

    def cancel(self) -> None:
        self.cancelled = True


def test_stream_is_not_retried_after_the_first_response(monkeypatch: pytest.MonkeyPatch) -> None:
    client = TritonClient("http://127.0.0.1:1")
    client._models[("gen", "")] = INFO
    opened: list[_DroppingCall] = []

    def open_stream(plan: Any, stats: Any) -> _DroppingCall:
        opened.append(_DroppingCall())
        return opened[-1]

    monkeypatch.setattr(client, "_open_stream", open_stream)
    got = []
    with pytest.raises(EndpointUnreachableError):
        for r in client.stream("gen", PROMPT="hi", M=[[1.0]]):
            got.append(r.text("TEXT"))
    assert got == ["a"]
    assert len(opened) == 1 and opened[0].cancelled
