"""The streaming pipelines (vlm_stream, arr_coc_stream) on the real tritonserver 2.51.

Called with clients we did not write: tritonclient's gRPC bidirectional stream and raw
server-sent events from HTTP ``generate_stream`` (ensembles/plain_streams.py). The pieces
joined are the unary twin's answer (asked of the same server); MAX_TOKENS ends a stream early;
bad input ends that stream only, with the stage's message; a cancelled stream stops the decoder,
proven by the decoder's own counters on Triton's metrics endpoint and its log line.
"""

from __future__ import annotations

import time
from functools import cache
from typing import Any

import numpy as np
import pytest

from tests._examples import load_example

pytestmark = pytest.mark.integration

reference = load_example("ensembles/reference.py")
plain = load_example("ensembles/plain_streams.py")
stream_grpc, stream_sse, decoder_counters = plain.stream_grpc, plain.stream_sse, plain.decoder_counters
#: streaming pipeline -> (unary twin, its decoupled decoder, a question)
PIPELINES = {
    "vlm_stream": ("vlm_ensemble", "vlm_model_stream", "Describe the image."),
    "arr_coc_stream": ("arr_coc", "arr_coc_decoder_stream", "Where is the sun?"),
}
PIECES = "tritonkit_generated_pieces_total"
CANCELLED = "tritonkit_generation_cancelled_total"
ACTIVE = "tritonkit_generation_active"


def _text(value: str | bytes) -> np.ndarray:
    return np.array([value if isinstance(value, bytes) else value.encode()], dtype=np.object_)


def _inputs(question: str, **extra: np.ndarray) -> dict[str, np.ndarray]:
    return {"RAW_IMAGE": reference.sample_bytes(), "TEXT_QUERY": _text(question), **extra}


def _stream(server: Any, protocol: str, model: str, inputs: dict[str, np.ndarray], **kwargs: Any) -> Any:
    if protocol == "sse":
        return stream_sse(server.http_address, model, inputs, **kwargs)
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(server.grpc_address)
    try:
        return stream_grpc(client, model, inputs, **kwargs)
    finally:
        client.close()


@cache
def _decoder_inputs(decoder: str) -> dict[str, np.ndarray]:
    """What the pipeline hands its decoder for the sample image, computed in-process."""
    raw = reference.sample_bytes()
    if decoder == "vlm_model_stream":
        pixels = reference.load_stage("vlm/image_preprocessor.py").preprocess(raw)
        colours, detail = reference.run_onnx("make_vision_encoder", {"PIXELS": pixels})
        question = _text("Describe the image.")
        return {"REGION_COLOURS": colours, "REGION_DETAIL": detail, "TEXT_QUERY": question}
    arr = reference.arr_coc(raw, "Where is the sun?")
    return {
        "TEXT_QUERY": _text("Where is the sun?"),
        "RELEVANCE": arr["RELEVANCE_MAP"],
        "TOKEN_BUDGET": arr["TOKEN_BUDGET"],
        "BALANCE": arr["BALANCE"],
        "TEXTURE": reference.load_stage("arr_coc/texture_array.py").texture_array(raw),
    }


def _unary_answer(server: Any, model: str, question: str) -> str:
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(server.http_address)
    tensors = []
    for name, value in _inputs(question).items():
        dtype = "UINT8" if value.dtype == np.uint8 else "BYTES"
        tensor = httpclient.InferInput(name, list(value.shape), dtype)
        tensor.set_data_from_numpy(value)
        tensors.append(tensor)
    result = client.infer(model, tensors, outputs=[httpclient.InferRequestedOutput("GENERATED_TEXT")])
    return str(result.as_numpy("GENERATED_TEXT")[0].decode())


def _wait_idle(server: Any, decoder: str, timeout_s: float = 10.0) -> dict[tuple[str, str], float]:
    """The counters once the decoder generates nothing any more."""
    deadline = time.monotonic() + timeout_s
    counters = decoder_counters(server.metrics_url)
    while counters.get((ACTIVE, decoder), 0) > 0 and time.monotonic() < deadline:
        time.sleep(0.05)
        counters = decoder_counters(server.metrics_url)
    return counters


@pytest.mark.parametrize("protocol", ["grpc", "sse"])
@pytest.mark.parametrize("pipeline", list(PIPELINES))
def test_streamed_pieces_join_to_the_unary_pipelines_answer_when_called_with_plain_clients(
    example_server: Any, pipeline: str, protocol: str
) -> None:
    unary, _, question = PIPELINES[pipeline]
    streamed = _stream(example_server, protocol, pipeline, _inputs(question))
    assert streamed.error is None and streamed.final, streamed
    answer = _unary_answer(example_server, unary, question)
    assert streamed.text == answer
    raw = reference.sample_bytes()
    if pipeline == "vlm_stream":
        assert answer == reference.vlm(raw, question)
    else:
        assert answer == reference.arr_coc(raw, question)["GENERATED_TEXT"]
    assert len(streamed.pieces) == len(answer.split()) > 20  # one word per response
    if protocol == "grpc":  # every piece, then a flags-only final response
        assert streamed.events == len(streamed.pieces) + 1
    else:
        assert streamed.status == "200"


@pytest.mark.parametrize("protocol", ["grpc", "sse"])
@pytest.mark.parametrize("pipeline", list(PIPELINES))
def test_max_tokens_ends_the_stream_after_that_many_pieces_when_given(
    example_server: Any, pipeline: str, protocol: str
) -> None:
    _, decoder, question = PIPELINES[pipeline]
    before = _wait_idle(example_server, decoder)
    inputs = _inputs(question, MAX_TOKENS=np.array([5], np.int32))
    limited = _stream(example_server, protocol, pipeline, inputs)
    assert limited.error is None and limited.final, limited
    assert len(limited.pieces) == 5
    answer = _unary_answer(example_server, PIPELINES[pipeline][0], question)
    assert answer.startswith(limited.text) and len(limited.text) < len(answer) // 4
    after = _wait_idle(example_server, decoder)
    assert after[(PIECES, decoder)] - before[(PIECES, decoder)] == 5


BAD = {
    "not an image": (
        {"RAW_IMAGE": np.frombuffer(b"this is not an image", np.uint8)}, "RAW_IMAGE is not a readable image"
    ),
    "empty image": ({"RAW_IMAGE": np.zeros(0, np.uint8)}, "RAW_IMAGE is empty"),
    "oversized query": ({"TEXT_QUERY": _text("red " * 1000)}, "TEXT_QUERY has 4000 characters"),
    "MAX_TOKENS 0": ({"MAX_TOKENS": np.array([0], np.int32)}, "MAX_TOKENS must be at least 1"),
}


@pytest.mark.parametrize("protocol", ["grpc", "sse"])
@pytest.mark.parametrize("pipeline", list(PIPELINES))
def test_bad_input_ends_that_stream_only_with_the_stages_message_when_sent(
    example_server: Any, pipeline: str, protocol: str
) -> None:
    question = PIPELINES[pipeline][2]
    for what, (override, message) in BAD.items():
        streamed = _stream(example_server, protocol, pipeline, {**_inputs(question), **override})
        assert streamed.pieces == [] and streamed.error is not None, (what, streamed)
        assert message in streamed.error, (what, streamed.error)
        assert streamed.events == 1, (what, streamed)  # the error is the stream's only response
        if protocol == "sse":
            assert streamed.status == "400", (what, streamed)
    # the next stream is served as if nothing happened
    good = _stream(example_server, protocol, pipeline, _inputs(question, MAX_TOKENS=np.array([3], np.int32)))
    assert good.error is None and len(good.pieces) == 3 and example_server.running


def test_bad_request_on_a_shared_grpc_stream_leaves_the_other_requests_on_it_answered(
    example_server: Any,
) -> None:
    import queue

    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(example_server.grpc_address)
    answers: queue.Queue[tuple[Any, Any]] = queue.Queue()
    client.start_stream(callback=lambda result, error: answers.put((result, error)))
    try:
        images = (("bad", np.frombuffer(b"junk", np.uint8)), ("good", reference.sample_bytes()))
        for request_id, image in images:
            tensors = []
            for name, value in _inputs("Describe the image.", MAX_TOKENS=np.array([4], np.int32)).items():
                value = image if name == "RAW_IMAGE" else value
                dtype = {np.dtype(np.uint8): "UINT8", np.dtype(np.int32): "INT32"}.get(value.dtype, "BYTES")
                tensor = grpcclient.InferInput(name, list(value.shape), dtype)
                tensor.set_data_from_numpy(value)
                tensors.append(tensor)
            client.async_stream_infer(
                "vlm_stream", tensors, request_id=request_id, enable_empty_final_response=True
            )
        seen: dict[str, list[str]] = {"bad": [], "good": []}
        while True:
            result, error = answers.get(timeout=30)
            if error is not None:
                seen["bad"].append(error.message())
                continue
            response = result.get_response()
            out = result.as_numpy("GENERATED_TEXT")
            if out is not None:
                seen[response.id].append(out[0].decode())
            if response.parameters["triton_final_response"].bool_param and response.id == "good":
                break
    finally:
        client.stop_stream()
        client.close()
    assert len(seen["bad"]) == 1 and "RAW_IMAGE is not a readable image" in seen["bad"][0]
    assert "".join(seen["good"]) == "The dominant colours are"


@pytest.mark.parametrize("protocol", ["grpc", "sse"])
@pytest.mark.parametrize("decoder", ["vlm_model_stream", "arr_coc_decoder_stream"])
def test_decoder_stops_generating_when_the_client_cancels_its_stream(
    example_server: Any, decoder: str, protocol: str
) -> None:
    full = len(reference.vlm(reference.sample_bytes(), "Describe the image.").split())
    before = _wait_idle(example_server, decoder)
    streamed = _stream(example_server, protocol, decoder, _decoder_inputs(decoder), stop_after=2)
    assert streamed.pieces and streamed.error is None
    after = _wait_idle(example_server, decoder)
    generated = after[(PIECES, decoder)] - before[(PIECES, decoder)]
    # at most the pieces in flight when the cancellation arrived (one DECODE_STEP_MS each)
    assert 2 <= generated <= 6 < full, generated
    assert after[(CANCELLED, decoder)] - before[(CANCELLED, decoder)] == 1
    assert after[(ACTIVE, decoder)] == 0
    assert f"{decoder}: the client cancelled the stream after" in example_server.logs()


@pytest.mark.parametrize("pipeline", list(PIPELINES))
def test_triton_251_lets_an_ensembles_running_decoder_finish_when_the_client_cancels(
    example_server: Any, pipeline: str
) -> None:
    """Triton 2.51 cancels only ensemble steps not yet scheduled (core#263: the parent's flag is
    checked between steps), so a stream cancelled mid-answer does not reach its running decoder:
    the decoder finishes the answer (bounded by MAX_TOKENS) and the server drops the pieces. If
    this fails, Triton forwards cancellation to running steps: update docs/pipelines.md."""
    unary, decoder, question = PIPELINES[pipeline]
    full = len(_unary_answer(example_server, unary, question).split())
    before = _wait_idle(example_server, decoder)
    streamed = _stream(example_server, "grpc", pipeline, _inputs(question), stop_after=2)
    assert len(streamed.pieces) == 2
    after = _wait_idle(example_server, decoder)
    assert after[(PIECES, decoder)] - before[(PIECES, decoder)] == full
    assert after[(CANCELLED, decoder)] == before[(CANCELLED, decoder)]
    assert after[(ACTIVE, decoder)] == 0
    again = _stream(example_server, "grpc", pipeline, _inputs(question, MAX_TOKENS=np.array([2], np.int32)))
    assert again.error is None and len(again.pieces) == 2
