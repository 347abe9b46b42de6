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
#: test-only copies of vlm_llm's front and of its engine whose answers run long (see _add_long_front)
LONG_FRONT = "vlm_llm_long"
LONG_LLM = "tiny_llm_long"
LONG_CONTEXT = 8192
LONG_TOKENS = 4000
#: the first try's gRPC deadline: past the prompt stages (~0.2 s idle), inside the LONG_TOKENS
#: answer (10-15 s of relaying, idle or beside two CPU hogs)
FIRST_DEADLINE_S = 3.0
CANCELLED = "tritonkit_generation_cancelled_total"
PIECES = "tritonkit_generated_pieces_total"
AFTER_CANCEL = "tritonkit_llm_tokens_after_cancel_total"
#: what a failed soak step's message shows (with its wrong answers, each whole)
STEP_FIELDS = ("model", "protocol", "concurrency", "other", "bad_not_4xx", "pipeline_wedged")


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
    """vlm_llm's front as LONG_FRONT, asking LONG_LLM (tiny_llm with a LONG_CONTEXT context) for
    up to LONG_TOKENS tokens with its end-of-sequence token ignored: every answer is as long as
    asked.

    vlm_llm's own answers (at most 128 tokens, ~0.3 s) leave no time to leave mid-answer on a busy
    box; 4,000 tokens take 10-15 s to relay. The copies leave
    vlm_llm and tiny_llm as users get them for the other tests. The tiny model's weights take any
    context (rotary positions): only its config, its tokenizer's and the engine's limit change."""
    from tritonkit.config import read_config, write_config

    engine = repository / LONG_LLM
    shutil.copytree(repository / LLM, engine)
    config = read_config(engine / "config.pbtxt")
    config.name = LONG_LLM
    write_config(config, engine / "config.pbtxt")
    for name, key in (
        ("config.json", "max_position_embeddings"),
        ("tokenizer_config.json", "model_max_length"),
    ):
        path = engine / "1" / "hf_model" / name
        path.write_text(json.dumps({**json.loads(path.read_text()), key: LONG_CONTEXT}, indent=2))
    args_path = engine / "1" / "model.json"
    args = json.loads(args_path.read_text())
    args["model"] = args["model"].replace(f"/{LLM}/", f"/{LONG_LLM}/")
    args_path.write_text(json.dumps({**args, "max_model_len": LONG_CONTEXT}, indent=2))

    shutil.copytree(repository / "vlm_llm", repository / LONG_FRONT)
    config = read_config(repository / LONG_FRONT / "config.pbtxt")
    config.name = LONG_FRONT
    config.parameters["LLM_MODEL"].string_value = LONG_LLM
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


def _leave_at_deadline(server: Any, deadline_s: float) -> None:
    """Stream to LONG_FRONT with a gRPC deadline of ``deadline_s`` (plain tritonclient) and return
    once the call has ended. The server ends the call at the deadline and Triton cancels the
    request, as for a client that cancels (the call's context reads cancelled), whether or not
    the client process runs at that moment.

    Not on anything the client measures (pieces read, the engine's CPU time, Triton's metrics):
    on a 2-core box, while the CPU vLLM engine generated, processes outside the server's session
    got no CPU for seconds at a time (docs/known-issues.md), so the client left only after the
    whole answer had been relayed."""
    import threading

    import tritonclient.grpc as grpcclient

    ended = threading.Event()

    def on_response(result: Any, error: Any) -> None:
        final = result is not None and result.get_response().parameters["triton_final_response"].bool_param
        if error is not None or final:
            ended.set()

    client = grpcclient.InferenceServerClient(server.grpc_address)
    try:
        client.start_stream(callback=on_response, stream_timeout=deadline_s)
        inputs = plain.grpc_inputs(_inputs("Describe the image.", max_tokens=LONG_TOKENS))
        client.async_stream_infer(LONG_FRONT, inputs, enable_empty_final_response=True)
        assert ended.wait(timeout=600), "the stream outlived its deadline by minutes"
    finally:
        client.stop_stream(cancel_requests=True)
        client.close()


def test_a_client_leaving_stops_the_front_while_the_engine_finishes_the_answer_on_2_51(
    llm_pipeline_server: Any,
) -> None:
    """Triton 2.51's BLS response iterator has no cancel() (python_backend PR #398 came later):
    the front stops forwarding at once, the engine generates the rest of MAX_TOKENS for nobody.

    Asked of LONG_FRONT, whose answers outlast the client; the client's stream ends at its
    deadline (see _leave_at_deadline). A deadline that passed before the front asked the engine
    (nothing wasted) is doubled, one that passed after the answer was relayed is halved."""
    server = llm_pipeline_server
    deadline_s = FIRST_DEADLINE_S
    tries: list[str] = []
    wasted = 0.0
    for _ in range(4):
        # The front's counters are cumulative; it counts a cancelled stream once it has drained
        # the engine's answer (seconds to a minute on a busy box), a relayed one piece by piece.
        cancelled = _counter(server, CANCELLED, LONG_FRONT)
        after = _counter(server, AFTER_CANCEL, LONG_FRONT)
        pieces = _counter(server, PIECES, LONG_FRONT)
        _leave_at_deadline(server, deadline_s)
        waited = time.monotonic() + 600
        while (
            _counter(server, CANCELLED, LONG_FRONT) == cancelled
            and _counter(server, PIECES, LONG_FRONT) < pieces + LONG_TOKENS
        ):
            assert time.monotonic() < waited, "the front neither ended nor counted the stream"
            time.sleep(0.1)
        wasted = _counter(server, AFTER_CANCEL, LONG_FRONT) - after
        if _counter(server, CANCELLED, LONG_FRONT) == cancelled:
            tries.append(f"deadline {deadline_s} s: the whole answer was relayed first")
            deadline_s /= 2
        elif wasted < 1:
            tries.append(f"deadline {deadline_s} s: passed before the front asked the engine")
            deadline_s *= 2
        else:
            assert _counter(server, CANCELLED, LONG_FRONT) == cancelled + 1, "one client left, once"
            break
    # the engine went on after the client left: up to the LONG_TOKENS asked for
    assert wasted >= 1, tries
    # and the engine still answers, right, afterwards
    again = _stream(server, "grpc", "vlm_llm", _inputs("Describe the image.", max_tokens=8))
    assert again.error is None and 1 <= len(again.pieces) <= 8


def test_llm_front_stubs_stay_healthy_when_most_clients_leave_mid_answer(llm_pipeline_server: Any) -> None:
    """Triton 2.51's stub answers is_cancelled() from a cache once it is true, so the front used to
    let go of a cancelled stream before the stub's cleanup of it, and the stub then freed its
    responses without the GIL: heap corruption, "Stub process ... is not healthy" for every later
    request of that instance, once tritonserver itself aborted (bls_streams.py). Measured before
    the fix at this load: a front stub dead within 120 streams; after: none."""
    import threading
    from collections import Counter

    import tritonclient.grpc as grpcclient

    server = llm_pipeline_server
    failed: Counter[str] = Counter()
    lock = threading.Lock()
    for pipeline, question in PIPELINES.items():
        todo = iter(range(120))

        def client(pipeline: str = pipeline, question: str = question, todo: Any = todo) -> None:
            grpc = grpcclient.InferenceServerClient(server.grpc_address)
            try:
                while True:
                    with lock:
                        i = next(todo, None)
                    if i is None:
                        return
                    leave = None if i % 4 == 3 else 3  # 3 of 4 clients leave after 3 pieces
                    stream = plain.stream_grpc(grpc, pipeline, _inputs(question), stop_after=leave)
                    if stream.error is not None:
                        with lock:
                            failed[f"{pipeline}: {stream.error[:100]}"] += 1
            finally:
                grpc.close()

        threads = [threading.Thread(target=client, daemon=True) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=600)
        assert not any(thread.is_alive() for thread in threads), "clients still streaming after 10 min"
    assert not failed, dict(failed)
    assert server.running


def test_llm_pipelines_and_their_engine_survive_a_hostile_mix_and_refuse_every_bad_request(
    llm_pipeline_server: Any,
) -> None:
    """benchmarks/hostile.py's soak on vlm_llm, arr_coc_llm and the vLLM stage itself: good,
    malformed and vanishing clients mixed over gRPC streams and SSE at concurrency 8 and 64, and
    both pipelines composed by the OpenAI front at 64 (#52). Every good stream is its greedy
    answer asked alone, every bad one one error that says what is wrong, the engine and the
    fronts go idle after each step, the server stays up and no stub dies (no stub pid gone: the
    kernel log's segfault lines are the host's, other tenants' stubs included, so they are
    recorded by the benchmark and not asserted here)."""
    from tritonkit.openai_front import ApiKeys, FrontServer, FrontSettings

    hostile = load_example("benchmarks/hostile.py")
    server = llm_pipeline_server
    keys = ApiKeys([hostile._openai_soak.KEY])
    settings = FrontSettings(triton_url=server.grpc_url, repository=server.repository, api_keys=keys)
    with FrontServer(settings) as front:
        result = hostile.soak(
            server,
            pipelines=(),
            stream_pipelines=hostile.LLM_STREAM_PIPELINES,
            openai_pipelines=tuple(PIPELINES),
            front=front,
            concurrency=(8, 64),
            requests=64,
            bad_share=0.2,
        )
    failed = [
        {k: s[k] for k in (*STEP_FIELDS, "stubs_crashed", "stub_segfaults_in_kernel_log", "wrong_answers")}
        for s in result["steps"]
        if s["server_crashed"]
        or s["pipeline_wedged"]
        or s["other"]
        or s["wrong_answers"]
        or s["stubs_crashed"]
        or s["stub_segfaults_in_kernel_log"]
    ]  # what went wrong, whole in the assertion's message
    assert result["server_crashes"] == 0 and result["pipelines_wedged"] == 0, failed
    assert result["stubs_crashed"] == 0, failed
    assert result["good_correct_pct"] == 100.0, failed
    assert result["bad_4xx_pct"] == 100.0, failed
    assert result["streams_left_generating"] == 0 and result["front_requests_left"] == 0, failed
    steps = {(s["model"], s["protocol"], s["concurrency"]) for s in result["steps"]}
    assert steps == {
        (m, p, c) for m in hostile.LLM_STREAM_PIPELINES for p in ("grpc-stream", "sse") for c in (8, 64)
    } | {(m, "openai", c) for m in PIPELINES for c in (8, 64)}
    assert all(s["bad"] > 0 and s["not_sent"] == 0 for s in result["steps"])
    assert server.running


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
