"""The LLM-decoder pipelines (vlm_llm, arr_coc_llm) and client calls on a real vLLM engine.

One tritonserver 2.51 serves the example pipelines and the tiny LLM (tritonkit's local vllm
backend on the CPU build of vLLM) for the whole session (``llm_pipeline_server``). The pipelines
are called with clients tritonkit did not write (tritonclient's gRPC stream, raw server-sent
events); their tokens are the engine's greedy answer to the prompt the vision stages built, asked
of the LLM stage directly; bad input ends that stream only; a client that leaves stops the
front, while on Triton 2.51 the engine finishes the answer for nobody (measured by the front's
counter). tritonkit's client and ``tritonkit infer --stream`` call the LLM stage itself.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests._examples import load_example
from tritonkit.client import TritonClient, llm_inputs
from tritonkit.errors import InferenceError

# The fixture's server starts a vLLM engine: 15-30 s on an idle CPU, minutes on a busy 2-core box.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

reference = load_example("ensembles/reference.py")
plain = load_example("ensembles/plain_streams.py")
demo = load_example("ensembles/demo.py")
#: pipeline -> a question (the demo's)
PIPELINES = {"vlm_llm": "Describe the image.", "arr_coc_llm": "Where is the sun?"}
LLM = "tiny_llm"
#: a test-only copy of vlm_llm's front whose answers run long (see _add_long_front)
LONG_FRONT = "vlm_llm_long"
LONG_FRONT_PROMPT = "vlm_llm_prompt"  # the ensemble that builds LONG_FRONT's prompt
LONG_TOKENS = 1500
CANCELLED = "tritonkit_generation_cancelled_total"
AFTER_CANCEL = "tritonkit_llm_tokens_after_cancel_total"
ACTIVE = "tritonkit_generation_active"
PIECES = "tritonkit_generated_pieces_total"


@pytest.fixture(scope="module")
def llm_pipeline_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One real tritonserver with the unary pipelines, the tiny LLM on vLLM and the LLM pipelines,
    for this module only (stopped at its end, so it never runs beside test_vllm_engine.py's).

    The tiny LLM is made (once, deterministic) in the ``llm`` venv, as ``make demo`` does."""
    from tritonkit.server import LocalTritonServer

    if demo.llm_python() is None:
        pytest.skip("the llm venv is missing: make llm-venv")
    repository = tmp_path_factory.mktemp("llm-pipelines") / "model_repository"
    demo.build_llm_repository(repository, quiet=True)
    _add_long_front(repository)
    with LocalTritonServer(repository) as server:
        yield server


def _add_long_front(repository: Path) -> None:
    """vlm_llm's front, same source, as LONG_FRONT: LONG_TOKENS allowed, and the engine told to
    ignore its end-of-sequence token, so every answer is LONG_TOKENS long.

    vlm_llm's own answer (at most 128 tokens) takes the engine ~0.3 s; under two CPU hogs the
    test's client read its first pieces later than that, so it left a stream that had already
    ended. The copy leaves vlm_llm as users get it for the other tests."""
    from tritonkit.config import read_config, write_config

    shutil.copytree(repository / "vlm_llm", repository / LONG_FRONT)
    config = read_config(repository / LONG_FRONT / "config.pbtxt")
    config.name = LONG_FRONT
    config.parameters["MAX_TOKENS_LIMIT"].string_value = str(LONG_TOKENS)
    sampling = json.loads(config.parameters["SAMPLING_PARAMETERS"].string_value)
    config.parameters["SAMPLING_PARAMETERS"].string_value = json.dumps({**sampling, "ignore_eos": True})
    write_config(config, repository / LONG_FRONT / "config.pbtxt")


def _text(value: str) -> np.ndarray:
    return np.array([value.encode()], dtype=np.object_)


def _inputs(question: str, max_tokens: int | None = None, image: np.ndarray | None = None) -> dict[str, Any]:
    inputs = {
        "RAW_IMAGE": reference.sample_bytes() if image is None else image,
        "TEXT_QUERY": _text(question),
    }
    if max_tokens is not None:
        inputs["MAX_TOKENS"] = np.array([max_tokens], dtype=np.int32)
    return inputs


def _stream(server: Any, protocol: str, model: str, inputs: dict[str, Any], **kwargs: Any) -> Any:
    if protocol == "sse":
        return plain.stream_sse(server.http_address, model, inputs, **kwargs)
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(server.grpc_address)
    try:
        return plain.stream_grpc(client, model, inputs, **kwargs)
    finally:
        client.close()


def _prompt(server: Any, pipeline: str, question: str) -> str:
    with TritonClient(server.http_url) as client:
        result = client.infer(
            f"{pipeline}_prompt", RAW_IMAGE=reference.sample_bytes(), TEXT_QUERY=_text(question)
        )
    return str(result["PROMPT"].reshape(-1)[0].decode())


def _engine_answer(server: Any, prompt: str, max_tokens: int) -> tuple[str, int]:
    """The LLM stage's own greedy answer to ``prompt``: (text, tokens it counted)."""
    request = llm_inputs(
        prompt,
        sampling={"max_tokens": max_tokens, "temperature": 0},
        outputs=["num_output_tokens"],
        exclude_input_in_output=True,
    )
    with TritonClient(server.grpc_url, protocol="grpc", request_timeout=120) as client:
        responses = list(client.stream(LLM, request))
    text = "".join(r.text("text_output") for r in responses if "text_output" in r.outputs)
    return text, sum(int(r["num_output_tokens"].sum()) for r in responses if "num_output_tokens" in r.outputs)


@pytest.mark.parametrize("protocol", ["grpc", "sse"])
@pytest.mark.parametrize("pipeline", list(PIPELINES))
def test_llm_pipeline_streams_the_engines_greedy_answer_to_its_prompt_token_by_token(
    llm_pipeline_server: Any, pipeline: str, protocol: str
) -> None:
    question = PIPELINES[pipeline]
    stream = _stream(llm_pipeline_server, protocol, pipeline, _inputs(question, max_tokens=16))
    assert stream.error is None, stream.error
    expected, tokens = _engine_answer(
        llm_pipeline_server, _prompt(llm_pipeline_server, pipeline, question), 16
    )
    assert 1 <= tokens <= 16
    # One response per generated token, except that vLLM merges the tokens a lagging reader has
    # not taken yet into one response (the backend's contract, docs/llm.md): on a busy box the
    # same tokens come in fewer pieces, never in more.
    assert 1 <= len(stream.pieces) <= tokens
    assert stream.text == expected  # greedy: the same tokens as asking the engine directly
    assert stream.first_s is not None and stream.last_s is not None and stream.last_s >= stream.first_s


def test_llm_pipeline_generates_its_default_token_count_when_max_tokens_is_absent(
    llm_pipeline_server: Any,
) -> None:
    stream = _stream(llm_pipeline_server, "grpc", "vlm_llm", _inputs("What colours are there?"))
    assert stream.error is None, stream.error
    assert 1 <= len(stream.pieces) <= 48  # DEFAULT_MAX_TOKENS of vlm_llm.yaml


@pytest.mark.parametrize("protocol", ["grpc", "sse"])
@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        (
            {"image": np.frombuffer(b"this is not an image", dtype=np.uint8)},
            "RAW_IMAGE is not a readable image",
        ),
        ({"question": "x" * 1990}, "TEXT_QUERY makes a prompt of"),
        ({"max_tokens": 500}, "MAX_TOKENS is 500; this pipeline generates at most 128"),
        ({"max_tokens": 0}, "MAX_TOKENS must be at least 1"),
    ],
    ids=["non-image", "question-past-the-context", "too-many-tokens", "zero-tokens"],
)
def test_llm_pipeline_refuses_bad_input_for_that_stream_only(
    llm_pipeline_server: Any, protocol: str, inputs: dict[str, Any], message: str
) -> None:
    bad = _inputs(
        inputs.get("question", "Describe the image."), inputs.get("max_tokens"), inputs.get("image")
    )
    for pipeline in PIPELINES:
        refused = _stream(llm_pipeline_server, protocol, pipeline, bad)
        assert refused.pieces == [] and refused.error is not None and message in refused.error, refused.error
        if protocol == "sse":
            assert refused.status == "400"
        good = _stream(llm_pipeline_server, protocol, pipeline, _inputs(PIPELINES[pipeline], max_tokens=4))
        assert good.error is None and 1 <= len(good.pieces) <= 4


def _counter(server: Any, name: str, model: str) -> float:
    return float(plain.decoder_counters(server.metrics_url).get((name, model), 0.0))


def _successes(server: Any, model: str) -> float:
    """Triton's own count of ``model``'s successful requests (``nv_inference_request_success``)."""
    import urllib.request

    with urllib.request.urlopen(server.metrics_url, timeout=10) as reply:  # noqa: S310 - loopback
        text = reply.read().decode()
    found = re.search(
        rf'^nv_inference_request_success\{{model="{re.escape(model)}",[^}}]*\}} (\S+)$', text, re.M
    )
    return float(found.group(1)) if found else 0.0


def _leave_once_the_prompt_is_built(server: Any, model: str, inputs: dict[str, Any]) -> bool:
    """Stream ``inputs`` to the front ``model`` over a plain tritonclient gRPC stream and cancel
    it once the front's prompt ensemble has answered (Triton counts an ensemble's requests itself;
    the front asks the engine next). False when the stream ended first (nothing left to cancel).

    Not on the engine's gauge or on pieces read: under CPU hogs the Python stubs' metrics lagged
    a whole request, and Triton passed the stream's first responses on seconds late."""
    import tritonclient.grpc as grpcclient

    tensors = plain.grpc_inputs(inputs)
    ended: list[bool] = []

    def on_response(result: Any, error: Any) -> None:
        params = result.get_response().parameters if result is not None else {}
        final = "triton_final_response" in params and params["triton_final_response"].bool_param
        if error is not None or final:
            ended.append(True)

    prompts = _successes(server, LONG_FRONT_PROMPT)
    client = grpcclient.InferenceServerClient(server.grpc_address)
    try:
        client.start_stream(callback=on_response)
        client.async_stream_infer(model, tensors, enable_empty_final_response=True)
        deadline = time.monotonic() + 120
        while _successes(server, LONG_FRONT_PROMPT) == prompts and not ended:
            assert time.monotonic() < deadline, "the front never built its prompt"
            time.sleep(0.01)
        left = not ended
        client.stop_stream(cancel_requests=True)
    finally:
        client.close()
    return left


def test_a_client_leaving_stops_the_front_while_the_engine_finishes_the_answer_on_2_51(
    llm_pipeline_server: Any,
) -> None:
    """Triton 2.51's BLS response iterator has no cancel() (python_backend PR #398 came later):
    the front stops forwarding at once, the engine generates the rest of MAX_TOKENS for nobody.

    Asked of LONG_FRONT (vlm_llm's front with a longer answer). The client leaves on server state:
    once the front's prompt ensemble has answered, just before the front asks the engine. Waiting
    for a first piece, or for the engine's gauge, lost the race on a busy box (docs/known-issues.md).
    A try whose stream ended first, whose front had relayed everything before it saw the
    cancellation (the tiny model is fast), or whose client's leaving reached the front before it
    asked the engine, asks again."""
    server = llm_pipeline_server
    tries: list[str] = []
    wasted = 0.0
    for _ in range(8):
        # The front's counters cross the Python stub's message queue, which lagged a whole request
        # under CPU hogs: only cumulative counters are read, and each is waited for, not polled once.
        cancelled = _counter(server, CANCELLED, LONG_FRONT)
        after = _counter(server, AFTER_CANCEL, LONG_FRONT)
        pieces = _counter(server, PIECES, LONG_FRONT)
        if not _leave_once_the_prompt_is_built(
            server, LONG_FRONT, _inputs("Describe the image.", max_tokens=LONG_TOKENS)
        ):
            tries.append("the stream ended before the front's prompt was seen built")
            continue
        deadline = time.monotonic() + 120
        while (
            _counter(server, CANCELLED, LONG_FRONT) == cancelled
            and _counter(server, PIECES, LONG_FRONT) - pieces < LONG_TOKENS
        ):
            assert time.monotonic() < deadline, (
                "the front neither relayed the answer nor saw the client leave"
            )
            time.sleep(0.05)
        if _counter(server, CANCELLED, LONG_FRONT) == cancelled:
            tries.append("the front relayed the whole answer first")
            continue
        assert _counter(server, CANCELLED, LONG_FRONT) == cancelled + 1, "one client left, once"
        while _counter(server, ACTIVE, LONG_FRONT) > 0 and time.monotonic() < deadline:
            time.sleep(0.1)  # the stream is counted cancelled (and its waste) before it stops being active
        assert _counter(server, ACTIVE, LONG_FRONT) == 0
        wasted = _counter(server, AFTER_CANCEL, LONG_FRONT) - after
        if wasted >= 1:
            break
        tries.append("the client left before the front had asked the engine")
    # the engine went on after the client left: up to the LONG_TOKENS asked for
    assert wasted >= 1, tries
    # and the engine still answers, right, afterwards
    again = _stream(server, "grpc", "vlm_llm", _inputs("Describe the image.", max_tokens=8))
    assert again.error is None and 1 <= len(again.pieces) <= 8


def test_llm_pipelines_and_their_engine_survive_a_hostile_mix_and_refuse_every_bad_request(
    llm_pipeline_server: Any,
) -> None:
    """benchmarks/hostile.py's soak on vlm_llm, arr_coc_llm and the vLLM stage itself: good,
    malformed and vanishing clients mixed over gRPC streams and SSE at concurrency 1 and 8. Every
    good stream is its greedy answer asked alone, every bad one one error that says what is wrong,
    the engine and the fronts go idle after each step and the server stays up."""
    hostile = load_example("benchmarks/hostile.py")
    result = hostile.soak(
        llm_pipeline_server,
        pipelines=(),
        stream_pipelines=hostile.LLM_STREAM_PIPELINES,
        concurrency=(1, 8),
        requests=15,
        bad_share=0.2,
    )
    failed = [s for s in result["steps"] if s["server_crashed"] or s["pipeline_wedged"] or s["other"]]
    assert result["server_crashes"] == 0 and result["pipelines_wedged"] == 0, failed
    assert result["good_correct_pct"] == 100.0, failed
    assert result["bad_4xx_pct"] == 100.0, failed
    assert result["streams_left_generating"] == 0, failed
    assert result["bad_requests"] == 3 * 2 * 2 * 3  # 3 models x 2 protocols x 2 levels, every 5th of 15
    assert {(s["model"], s["protocol"]) for s in result["steps"]} == {
        (m, p) for m in hostile.LLM_STREAM_PIPELINES for p in ("grpc-stream", "sse")
    }
    assert llm_pipeline_server.running


# -- tritonkit's client and CLI on the LLM stage ----------------------------------------------------


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_llm_inputs_stream_token_by_token_or_the_whole_answer_in_one_response(
    llm_pipeline_server: Any, protocol: str
) -> None:
    url = llm_pipeline_server.grpc_url if protocol == "grpc" else llm_pipeline_server.http_url
    sampling = {"max_tokens": 12, "temperature": 0}
    with TritonClient(url, protocol=protocol, request_timeout=120) as client:
        streamed = list(
            client.stream(
                LLM,
                llm_inputs(
                    "The image shows", sampling=sampling, outputs=["num_output_tokens", "finish_reason"]
                ),
            )
        )
        whole = list(
            client.stream(
                LLM,
                llm_inputs("The image shows", sampling=sampling, stream=False, exclude_input_in_output=True),
            )
        )
    assert len(whole) == 1
    tokens = sum(int(r["num_output_tokens"].sum()) for r in streamed)
    assert 1 <= tokens <= 12 and len(streamed) >= tokens - 1
    assert "".join(r.text("text_output") for r in streamed) == whole[0].text("text_output")
    reasons = [r.text("finish_reason") for r in streamed if r.text("finish_reason")]
    assert reasons[-1] in ("length", "stop")


def test_unary_infer_on_the_llm_stage_says_to_stream_before_sending(llm_pipeline_server: Any) -> None:
    with TritonClient(llm_pipeline_server.http_url) as client, pytest.raises(InferenceError) as info:
        client.infer(LLM, llm_inputs("Hello"))
    assert "a vLLM stage is always decoupled" in info.value.message
    assert "stream=False" in (info.value.hint or "")


def test_cli_infer_stream_prints_the_tokens_then_ttft_count_and_rate(
    llm_pipeline_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from tritonkit.cli.app import main

    argv = [
        "infer",
        llm_pipeline_server.grpc_url,
        LLM,
        "-p",
        "grpc",
        "--stream",
        "-i",
        "text_input=The image shows",
        "--sampling",
        '{"max_tokens": "8", "temperature": 0}',
    ]
    try:
        main(argv)
    except SystemExit as exc:
        assert not exc.code, capsys.readouterr().err
    out, err = capsys.readouterr()
    assert out.strip()  # the generated text
    assert "token(s), first token after" in err and "s in all" in err
