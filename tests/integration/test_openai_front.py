"""The OpenAI front on a real tritonserver 2.51 and the real tiny vLLM engine.

One server for the module (the tiny LLM, vlm_llm, arr_coc_llm, vlm_stream, arr_coc_stream, the
pipelines' ``openai.*`` parameters written by the build from their specs' ``openai:`` key) and
two fronts before it: the main one with an API key, and one with tight limits. The
official ``openai`` client (sync and async, streamed and not) is the caller, as in applications.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from tests._examples import load_example
from tritonkit.client import TritonClient, llm_inputs
from tritonkit.openai_front import ApiKeys, FrontServer, FrontSettings, Limits

openai = pytest.importorskip("openai")

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

reference = load_example("ensembles/reference.py")
plain = load_example("ensembles/plain_streams.py")
demo = load_example("ensembles/demo.py")

KEY = "sk-test-front-key"
#: a second key, named in the key file: metrics show "team-b", never the key
NAMED_KEY = "sk-test-team-b-key"
LLM = "tiny_llm"
PIPELINES = ("vlm_llm", "arr_coc_llm", "vlm_stream", "arr_coc_stream")
ACTIVE = "tritonkit_generation_active"
_ABORTED = re.compile(
    r"request \w+ (?:cancelled by the client|dropped by the client[^;]*); aborted in the engine"
)
#: vLLM's own line once its engine has taken a request (``enable_log_requests``, set below)
_ADDED = re.compile(r"Added request \S+\.")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from tritonkit.repository import build_spec
    from tritonkit.server import LocalTritonServer

    if demo.llm_python() is None:
        pytest.skip("the llm venv is missing: make llm-venv")
    repository = tmp_path_factory.mktemp("openai-front") / "model_repository"
    demo.build_llm_repository(repository, quiet=True)
    # vLLM logs each request its engine takes: the state a client that leaves waits on (_leave)
    engine_json = repository / LLM / "1" / "model.json"
    engine_json.write_text(json.dumps({**json.loads(engine_json.read_text()), "enable_log_requests": True}))
    for spec in ("vlm_stream.yaml", "arr_coc_stream.yaml"):
        build_spec(demo.HERE / spec, repository, force=True)  # each spec's openai: key maps it
    with LocalTritonServer(repository) as server:
        keys = ApiKeys([KEY, f"team-b {NAMED_KEY}"])
        # as serve --openai-port and AKS run it: answers stream over Triton's HTTP generate_stream
        # (choices with an image over gRPC); the tight front streams over gRPC, so both are tested
        settings = FrontSettings(
            triton_url=server.grpc_url, stream_url=server.http_url, repository=repository, api_keys=keys
        )
        tight = FrontSettings(
            triton_url=server.grpc_url,
            repository=repository,
            limits=Limits(
                max_body_bytes=200_000, max_image_pixels=64 * 64, max_messages=4, max_prompt_chars=3000
            ),
        )
        with FrontServer(settings) as front, FrontServer(tight) as small:
            yield {"server": server, "front": front, "small": small, "repository": repository}


def _client(served: dict[str, Any], key: str = KEY) -> Any:
    return openai.OpenAI(base_url=served["front"].url + "/v1", api_key=key, max_retries=0, timeout=600)


def _image_url() -> str:
    return "data:image/png;base64," + base64.b64encode(bytes(reference.sample_bytes())).decode()


def _vision_message(question: str, url: str | None = None) -> list[dict[str, Any]]:
    parts = [
        {"type": "text", "text": question},
        {"type": "image_url", "image_url": {"url": url or _image_url()}},
    ]
    return [{"role": "user", "content": parts}]


def _engine_answer(server: Any, prompt: str, max_tokens: int) -> tuple[str, int]:
    request = llm_inputs(
        prompt,
        sampling={"max_tokens": max_tokens, "temperature": 0},
        outputs=["num_output_tokens"],
        exclude_input_in_output=True,
    )
    with TritonClient(server.grpc_url, protocol="grpc", request_timeout=300) as client:
        responses = list(client.stream(LLM, request))
    text = "".join(r.text("text_output") for r in responses if "text_output" in r.outputs)
    return text, sum(int(r["num_output_tokens"].sum()) for r in responses if "num_output_tokens" in r.outputs)


def _stage_counts(server: Any, model: str, question: str, max_tokens: int) -> tuple[int, int, str]:
    """What the LLM stage itself reports for the request ``model`` (a pipeline) makes of
    ``question``: its prompt ensemble's PROMPT, then the stage's counts and finish reason."""
    with TritonClient(server.grpc_url, protocol="grpc", request_timeout=300) as client:
        prompt = client.infer(
            f"{model}_prompt",
            {
                "RAW_IMAGE": reference.sample_bytes(),
                "TEXT_QUERY": np.array([question.encode()], dtype=np.object_),
            },
        )["PROMPT"].reshape(-1)[0]
        request = llm_inputs(
            prompt.decode(),
            sampling={"temperature": 0, "max_tokens": max_tokens},
            outputs=["num_input_tokens", "num_output_tokens", "finish_reason"],
            exclude_input_in_output=True,
        )
        responses = list(client.stream(LLM, request))
    counted = [r for r in responses if "num_output_tokens" in r.outputs]
    reasons = [r.text("finish_reason") for r in counted if r.text("finish_reason") not in ("", "None")]
    return (
        int(counted[0]["num_input_tokens"].reshape(-1)[0]),
        sum(int(r["num_output_tokens"].sum()) for r in counted),
        reasons[-1],
    )


def _pipeline_answer(server: Any, model: str, question: str, max_tokens: int) -> str:
    with TritonClient(server.grpc_url, protocol="grpc", request_timeout=300) as client:
        stream = client.stream(
            model,
            RAW_IMAGE=reference.sample_bytes(),
            TEXT_QUERY=np.array([question.encode()], dtype=np.object_),
            MAX_TOKENS=np.array([max_tokens], dtype=np.int32),
        )
        return "".join(r.text("GENERATED_TEXT") for r in stream if "GENERATED_TEXT" in r.outputs)


# -- models --------------------------------------------------------------------------------------


def test_front_lists_the_llm_stage_and_every_mapped_pipeline_and_nothing_else(served: dict[str, Any]) -> None:
    ids = {m.id for m in _client(served).models.list()}
    assert ids == {LLM, *PIPELINES}
    assert _client(served).models.retrieve("vlm_llm").id == "vlm_llm"
    with pytest.raises(openai.NotFoundError):
        _client(served).models.retrieve("vlm_llm_prompt")  # a stage, not mapped


# -- answers -------------------------------------------------------------------------------------


def test_front_completion_is_the_engines_greedy_answer_with_its_token_counts(served: dict[str, Any]) -> None:
    prompt = "The quick brown fox"
    answer = _client(served).completions.create(model=LLM, prompt=prompt, max_tokens=12, temperature=0)
    expected, tokens = _engine_answer(served["server"], prompt, 12)
    assert answer.choices[0].text == expected  # character for character
    assert answer.usage is not None and answer.usage.completion_tokens == tokens
    assert answer.usage.prompt_tokens > 0
    assert answer.choices[0].finish_reason == ("length" if tokens == 12 else "stop")


def test_front_chat_streamed_joins_to_the_unary_answer_and_reports_the_same_usage(
    served: dict[str, Any],
) -> None:
    client = _client(served)
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there"}]
    unary = client.chat.completions.create(model=LLM, messages=messages, max_tokens=10, temperature=0)
    chunks = list(
        client.chat.completions.create(
            model=LLM,
            messages=messages,
            max_tokens=10,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert unary.choices[0].message.content and text == unary.choices[0].message.content
    assert chunks[-1].choices == [] and chunks[-1].usage == unary.usage
    assert unary.usage is not None and unary.usage.completion_tokens <= 10
    finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finish == [unary.choices[0].finish_reason]
    assert unary.choices[0].finish_reason == ("length" if unary.usage.completion_tokens == 10 else "stop")


def test_front_async_client_streams_and_answers_n_choices(served: dict[str, Any]) -> None:
    async def run() -> tuple[Any, str, Any]:
        client = openai.AsyncOpenAI(
            base_url=served["front"].url + "/v1", api_key=KEY, max_retries=0, timeout=600
        )
        try:
            unary = await client.completions.create(
                model=LLM, prompt="Once upon", max_tokens=6, temperature=0, n=2
            )
            stream = await client.completions.create(
                model=LLM, prompt="Once upon", max_tokens=6, temperature=0, stream=True, echo=True
            )
            pieces = [c.choices[0].text async for c in stream if c.choices]
            logprobs = await client.completions.create(
                model=LLM, prompt="Once upon", max_tokens=3, logprobs=2
            )
            return unary, "".join(pieces), logprobs
        finally:
            await client.close()

    unary, streamed, logprobs = asyncio.run(run())
    assert [c.index for c in unary.choices] == [0, 1]
    assert unary.choices[0].text == unary.choices[1].text  # greedy: both choices alike
    assert streamed == "Once upon" + unary.choices[0].text  # echo puts the prompt first
    assert (
        unary.usage is not None
        and unary.usage.completion_tokens == 2 * _engine_answer(served["server"], "Once upon", 6)[1]
    )
    lp = logprobs.choices[0].logprobs
    assert lp is not None and len(lp.tokens) == len(lp.token_logprobs) >= 1
    assert all(v <= 0 for v in lp.token_logprobs) and all(1 <= len(t) <= 2 for t in lp.top_logprobs)


def test_front_vlm_pipeline_answers_an_image_question_as_the_pipeline_does_over_grpc(
    served: dict[str, Any],
) -> None:
    client = _client(served)
    question = "Describe the image."
    answer = client.chat.completions.create(
        model="vlm_llm", messages=_vision_message(question), max_tokens=16
    )
    expected = _pipeline_answer(served["server"], "vlm_llm", question, 16)
    assert expected and answer.choices[0].message.content == expected
    streamed = client.chat.completions.create(
        model="vlm_llm", messages=_vision_message(question), max_tokens=16, stream=True
    )
    assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == expected
    for model in ("vlm_stream", "arr_coc_stream"):  # no LLM stage: no usage rather than a guess
        other = client.chat.completions.create(
            model=model, messages=_vision_message("Where is the sun?"), max_tokens=8
        )
        assert other.choices[0].message.content and other.usage is None, model
        assert client.models.retrieve(model).model_extra["tritonkit"]["usage"] == "none"


@pytest.mark.parametrize("model", ["vlm_llm", "arr_coc_llm"])
def test_front_pipeline_usage_is_the_llm_stages_own_count_unary_and_streamed(
    served: dict[str, Any], model: str
) -> None:
    """The pipeline relays its vLLM stage's counts: the official client's ``usage`` equals what the
    stage reports over gRPC for the same prompt, and the engine's finish reason comes through."""
    client = _client(served)
    question, limit = "Describe the image.", 12
    prompt_tokens, completion_tokens, reason = _stage_counts(served["server"], model, question, limit)
    expected = (prompt_tokens, completion_tokens, prompt_tokens + completion_tokens)
    unary = client.chat.completions.create(model=model, messages=_vision_message(question), max_tokens=limit)
    assert unary.usage is not None
    assert (unary.usage.prompt_tokens, unary.usage.completion_tokens, unary.usage.total_tokens) == expected
    assert unary.choices[0].finish_reason == reason == ("length" if completion_tokens == limit else "stop")
    chunks = list(
        client.chat.completions.create(
            model=model,
            messages=_vision_message(question),
            max_tokens=limit,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    usage = chunks[-1].usage
    assert usage is not None and not chunks[-1].choices
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == expected
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == [
        reason
    ]
    two = client.chat.completions.create(
        model=model, messages=_vision_message(question), max_tokens=limit, n=2
    )
    assert two.usage is not None and two.usage.completion_tokens == 2 * completion_tokens  # n sums choices
    assert two.usage.prompt_tokens == prompt_tokens
    two_streamed = list(
        client.chat.completions.create(
            model=model,
            messages=_vision_message(question),
            max_tokens=limit,
            n=2,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    summed = two_streamed[-1].usage
    assert summed is not None and (summed.prompt_tokens, summed.completion_tokens) == (
        prompt_tokens,
        2 * completion_tokens,
    )
    assert client.models.retrieve(model).model_extra["tritonkit"] == {"kind": "pipeline", "usage": "engine"}


def test_front_metrics_count_tokens_by_model_and_key_id_and_never_show_a_key(
    served: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    def tokens(text: str, model: str, key: str) -> int:
        found = re.search(
            rf'tritonkit_openai_tokens_total{{model="{model}",kind="completion",key="{key}"}} (\d+)', text
        )
        return int(found.group(1)) if found else 0

    from tritonkit.openai_front.auth import key_id

    url = served["front"].url
    before = httpx.get(url + "/metrics").text
    counts = {}
    for key, ident in ((KEY, key_id(KEY)), (NAMED_KEY, "team-b")):
        answer = _client(served, key).completions.create(model=LLM, prompt="Once upon", max_tokens=5)
        assert answer.usage is not None
        counts[ident] = answer.usage.completion_tokens
    refused = httpx.post(
        url + "/v1/completions",
        headers={"Authorization": f"Bearer {KEY}x"},
        json={"model": LLM, "prompt": "x"},
    )
    assert refused.status_code == 401
    after = httpx.get(url + "/metrics").text
    for ident, count in counts.items():
        assert tokens(after, LLM, ident) - tokens(before, LLM, ident) == count, ident
    assert 'status="401",key="none"' in after
    for secret in (KEY, NAMED_KEY, "sk-test"):  # no key text in metrics, errors or logs
        assert secret not in after and secret not in refused.text and secret not in caplog.text


# -- keys, limits, bad input ---------------------------------------------------------------------


def test_front_refuses_a_request_without_a_valid_key_with_401(served: dict[str, Any]) -> None:
    for key in ("wrong", KEY + "x", ""):
        with pytest.raises(openai.AuthenticationError) as caught:
            _client(served, key or "-").models.list()
        assert caught.value.status_code == 401 and KEY not in str(caught.value.body)
    assert httpx.get(served["front"].url + "/health/ready").status_code == 200  # probes need no key


def test_front_limits_refuse_that_request_only(served: dict[str, Any]) -> None:
    small = openai.OpenAI(base_url=served["small"].url + "/v1", api_key="none", max_retries=0, timeout=600)
    with pytest.raises(openai.APIStatusError) as big_body:
        small.chat.completions.create(model="vlm_llm", messages=_vision_message("x" * 250_000))
    assert big_body.value.status_code == 413
    with pytest.raises(openai.APIStatusError) as big_image:
        small.chat.completions.create(model="vlm_llm", messages=_vision_message("Describe the image."))
    assert big_image.value.status_code == 413 and "pixels" in str(big_image.value.body)
    with pytest.raises(openai.BadRequestError, match="at most 4"):
        small.chat.completions.create(model=LLM, messages=[{"role": "user", "content": "hi"}] * 5)
    with pytest.raises(openai.BadRequestError, match="at most 3000"):
        small.completions.create(model=LLM, prompt="y" * 3001)
    ok = small.completions.create(model=LLM, prompt="Still here", max_tokens=2)
    assert ok.choices[0].text


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        (b"{not json", 400, "not valid JSON"),
        ({"model": LLM, "messages": "hi"}, 400, "'messages' must be a non-empty array"),
        ({"model": LLM, "messages": [{"role": "user", "content": "hi"}], "max_tokens": "9"}, 400, "integer"),
        ({"model": "no_such_model", "messages": [{"role": "user", "content": "hi"}]}, 404, "does not exist"),
        ({"model": "vlm_llm", "messages": _vision_message("q", "data:image/png;base64,@@@")}, 400, "base64"),
        (
            {
                "model": "vlm_llm",
                "messages": _vision_message(
                    "q", "data:image/png;base64," + base64.b64encode(b"no image here").decode()
                ),
            },
            400,
            "not an image",
        ),
        (
            {"model": "vlm_llm", "messages": _vision_message("q", "https://example.com/a.png")},
            400,
            "allow-list",
        ),
        ({"model": "vlm_llm", "messages": _vision_message("q"), "max_tokens": 500}, 400, "at most 128"),
        ({"model": "vlm_llm", "messages": _vision_message("q"), "logprobs": True}, 400, "logprobs"),
        ({"model": LLM, "messages": _vision_message("q")}, 400, "takes no images"),
        ({"model": LLM, "prompt": "z" * 70_000}, 400, "at most 65536"),
    ],
    ids=[
        "malformed-json",
        "wrong-type",
        "wrong-number-type",
        "unknown-model",
        "bad-base64",
        "non-image",
        "url-not-allowed",
        "too-many-tokens-for-the-pipeline",
        "logprobs-of-a-pipeline",
        "image-to-llm-stage",
        "huge-prompt",
    ],
)
def test_front_answers_bad_input_with_an_openai_error_for_that_request_only(
    served: dict[str, Any], body: Any, status: int, words: str
) -> None:
    path = "/v1/completions" if isinstance(body, dict) and "prompt" in body else "/v1/chat/completions"
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"authorization": f"Bearer {KEY}", "content-type": "application/json"}
    for stream in (False, True):
        sent = content if isinstance(body, bytes) else json.dumps({**body, "stream": stream}).encode()
        reply = httpx.post(served["front"].url + path, content=sent, headers=headers, timeout=600)
        assert reply.status_code == status, reply.text
        error = reply.json()["error"]
        assert set(error) == {"message", "type", "param", "code"} and words in error["message"], error
    good = _client(served).completions.create(model=LLM, prompt="And then", max_tokens=2)
    assert good.choices[0].text


# -- a client that leaves ------------------------------------------------------------------------


def _in_engine(server: Any) -> float:
    return float(plain.decoder_counters(server.metrics_url).get((ACTIVE, LLM), 0.0))


def _why_not_in_engine(server: Any, sock: Any) -> str:
    """What the front answered the raw socket (if anything) and the engine's last log lines."""
    sock.settimeout(0.5)
    try:
        answer = sock.recv(2000).decode("utf-8", "replace")
    except OSError as exc:
        answer = f"(nothing: {exc})"
    engine = [line for line in server.logs().splitlines() if "tritonkit vllm" in line][-8:]
    return f"front answered: {answer!r}; engine log: {engine}"


def _leave(served: dict[str, Any], body: dict[str, Any], *, after_headers: bool) -> str:
    """POST ``body`` to the front from a raw socket and close it: once vLLM has logged that its
    engine took the request, or (``after_headers``) once the front's 200 has come, which it sends
    after the engine's first piece. Then wait for the engine's abort. '' when the engine aborted
    the request, else why not (the caller asks again).

    Why not close at once: the front passes on no request whose client has already left
    (``_race_disconnect``), and beside two CPU hogs it saw the close first on all 8 tries of one
    run, so nothing reached the engine to abort.

    Why not on the engine's gauge: under two CPU hogs Triton's metrics of the Python-backend
    engine lagged a whole request behind (the gauge never rose for a 6 s answer and rose during
    the next one; its request count too), and the tiny model's longest answer (1,983 tokens)
    took 0.3 to 8 s. A client that leaves before the front has passed its request on costs
    nothing in the engine, so that try does not count either."""
    import select
    import socket
    from urllib.parse import urlsplit

    server = served["server"]
    aborted_before = len(_ABORTED.findall(server.logs()))
    added_before = len(_ADDED.findall(server.logs()))
    content = json.dumps(body).encode()
    address = urlsplit(served["front"].url)
    request = (
        f"POST /v1/completions HTTP/1.1\r\nHost: {address.netloc}\r\nAuthorization: Bearer {KEY}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(content)}\r\n\r\n"
    ).encode() + content
    deadline = time.monotonic() + 120
    with socket.create_connection((address.hostname, address.port)) as sock:
        sock.sendall(request)
        got = b""
        while after_headers and b"\r\n\r\n" not in got:
            assert time.monotonic() < deadline, _why_not_in_engine(server, sock)
            if select.select([sock], [], [], 0.05)[0]:
                chunk = sock.recv(65536)
                assert chunk, "the front closed the connection without an answer"
                got += chunk
        assert not got or got.startswith(b"HTTP/1.1 200"), got[:200]
        if b"[DONE]" in got:
            return "the whole stream came with its headers"
        while not after_headers and len(_ADDED.findall(server.logs())) == added_before:
            assert time.monotonic() < deadline, _why_not_in_engine(server, sock)
            if select.select([sock], [], [], 0.05)[0]:
                return f"the front answered before the engine had the request: {sock.recv(2000)[:200]!r}"
    # The abort's log line comes once the engine sees the cancellation at its next output; the
    # gauge lags, so both are waited for: the line first, a request that finished leaves none.
    settle = time.monotonic() + 30
    while len(_ABORTED.findall(server.logs())) == aborted_before:
        if time.monotonic() > settle and _in_engine(server) == 0:
            return "no abort in the engine: it finished first, or never had the request"
        assert time.monotonic() < deadline, "the request never left the engine"
        time.sleep(0.1)
    aborted = len(_ABORTED.findall(server.logs())) - aborted_before
    assert aborted == 1, f"{aborted} aborts for one request"
    return ""


def _leave_until_aborted(served: dict[str, Any], body: dict[str, Any], *, after_headers: bool) -> None:
    """:func:`_leave` until one try shows the engine's abort (8 tries at most)."""
    tries: list[str] = []
    for _ in range(8):
        tries.append(_leave(served, body, after_headers=after_headers))
        if not tries[-1]:
            return
    raise AssertionError(f"no try ended in an abort: {tries}")


def _answer_499(served: dict[str, Any]) -> None:
    """The request the client left is counted 499, and the engine is idle and answers again."""
    server = served["server"]
    deadline = time.monotonic() + 120
    while _in_engine(server) > 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _in_engine(server) == 0
    again = _client(served).completions.create(model=LLM, prompt="Back again", max_tokens=2)
    assert again.choices[0].text
    metrics = httpx.get(served["front"].url + "/metrics").text
    left = r'requests_total\{model="tiny_llm",endpoint="completions",status="499",key="[^"]*"\} [1-9]'
    assert re.search(left, metrics)


#: the tiny model's longest greedy answer we found: 1,983 tokens before its end-of-sequence token
#: ("Tell a long story" ends after 1,125); the front has no ignore_eos to ask for more
LONGEST = {"model": LLM, "prompt": "List every colour you know", "max_tokens": 2000, "temperature": 0}


def test_front_client_leaving_mid_stream_cancels_its_request_in_the_engine(served: dict[str, Any]) -> None:
    """The client leaves an SSE stream once its 200 has come (the engine has made a first piece)."""
    _leave_until_aborted(served, {**LONGEST, "stream": True}, after_headers=True)
    _answer_499(served)
    metrics = httpx.get(served["front"].url + "/metrics").text
    assert 'tritonkit_openai_time_to_first_token_seconds_count{model="tiny_llm"}' in metrics


def test_front_client_leaving_before_a_unary_answer_cancels_its_request_in_the_engine(
    served: dict[str, Any],
) -> None:
    """The client sends a unary request and leaves once the engine has it, long before its answer."""
    _leave_until_aborted(served, LONGEST, after_headers=False)
    _answer_499(served)


# -- measured by tritonkit perf ------------------------------------------------------------------


def _perf_settings(served: dict[str, Any], **changes: Any) -> Any:
    from tritonkit.perf import PerfSettings

    base: dict[str, Any] = {
        "url": served["front"].url,
        "model": LLM,
        "openai": "completions",
        "levels": (2.0,),
        "measurement_interval_ms": 1500,
        "max_trials": 3,
        "warmup_s": 0.5,
    }
    return PerfSettings(**{**base, **changes})


def test_perf_measures_the_front_from_its_sse_stream_counting_the_servers_usage(
    served: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tritonkit.perf import run_perf
    from tritonkit.perf.llm import Length, LlmLoad

    # No tokenizer given: perf looks in ./model_repository, which `make demo` fills with tiny_llm's
    # tokenizer in a checkout; from an empty directory the fallback is the response count.
    monkeypatch.chdir(tmp_path)

    settings = _perf_settings(served, llm=LlmLoad(output_tokens=Length(8), prompts=4))
    (step,) = run_perf(settings, headers={"Authorization": f"Bearer {KEY}"}).steps
    st = step.stream
    assert step.error_count == 0 and step.requests > 0 and st is not None
    assert st.token_counting == "usage, else responses"
    assert st.ttft is not None and st.output_tokens_per_s > 0
    assert st.output_tokens is not None and 1 <= st.output_tokens.min_us <= st.output_tokens.max_us <= 8
    assert st.input_tokens is not None and st.input_tokens.min_us > 0  # the front's prompt_tokens
    # the front's own token counter, read between the same windows: a second, independent count
    # (it counts an answer when it ends, perf as pieces arrive: the edges of a window may differ)
    assert st.server_output_tokens_per_s is not None and st.server_output_tokens_per_s > 0
    assert abs(st.server_output_tokens_per_s / st.output_tokens_per_s - 1) < 0.5
    (refused,) = run_perf(_perf_settings(served, levels=(1.0,))).steps  # no key
    assert refused.requests == 0 and set(refused.errors) == {"http 401"}


def test_perf_streams_an_image_question_to_the_vlm_pipeline_through_the_front(
    served: dict[str, Any], tmp_path: Path
) -> None:
    from tritonkit.perf import run_perf
    from tritonkit.perf.llm import LlmLoad

    (tmp_path / "sample.png").write_bytes(bytes(reference.sample_bytes()))
    dataset = tmp_path / "vlm.jsonl"
    dataset.write_text(
        json.dumps({"prompt": "Describe the image.", "output_tokens": 8, "image": "sample.png"})
    )
    settings = _perf_settings(
        served, model="vlm_llm", openai="chat", levels=(1.0,), llm=LlmLoad(dataset=str(dataset))
    )
    (step,) = run_perf(settings, headers={"Authorization": f"Bearer {KEY}"}).steps
    st = step.stream
    assert step.error_count == 0 and step.requests > 0 and st is not None
    assert st.ttft is not None and st.responses >= step.requests


# -- the hostile soak, short -----------------------------------------------------------------------


def test_front_survives_a_hostile_mix_refusing_every_bad_request_with_4xx_and_goes_idle(
    served: dict[str, Any],
) -> None:
    """benchmarks/hostile.py's front steps, short: good answers right, every bad one a 4xx, the
    front, the engine and the pipeline idle after each step."""
    hostile = load_example("benchmarks/hostile.py")
    keys = ApiKeys([hostile._openai_soak.KEY])
    settings = FrontSettings(
        triton_url=served["server"].grpc_url, repository=served["repository"], api_keys=keys
    )
    with FrontServer(settings) as front:
        result = hostile.soak(
            served["server"],
            pipelines=(),
            stream_pipelines=(),
            openai_pipelines=(LLM, "vlm_llm"),
            front=front,
            concurrency=(4,),
            requests=30,
            bad_share=0.4,
        )
    failures = [(s["model"], s["bad_not_4xx"], s["other"]) for s in result["steps"] if s["other"]]
    assert result["server_crashes"] == 0 and result["pipelines_wedged"] == 0, failures
    assert result["good_correct_pct"] == 100 and result["bad_4xx_pct"] == 100, failures
    assert result["streams_left_generating"] == 0 and result["front_requests_left"] == 0


def test_demo_asks_vlm_llm_about_the_image_through_the_front_with_the_openai_client(
    served: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    answer = demo.ask_through_openai_front(served["server"], served["repository"])
    expected = _pipeline_answer(served["server"], "vlm_llm", demo.VLM_QUERIES[0], demo.LLM_MAX_TOKENS)
    assert answer == expected and answer
    shown = capsys.readouterr().out
    assert "the streamed answer equals the unary one" in shown and "vlm_llm" in shown
    assert "valid against the schema: yes" in shown  # the image described as JSON of a schema


def test_front_arr_coc_pipeline_answers_an_image_question_as_json_of_a_schema(served: dict[str, Any]) -> None:
    """arr_coc_llm's mapping names its sampling input: response_format reaches its vLLM stage."""
    jsonschema = pytest.importorskip("jsonschema")
    fmt = {"type": "json_schema", "json_schema": {"name": "image", "schema": demo.IMAGE_SCHEMA}}
    ask: dict[str, Any] = {
        "model": "arr_coc_llm",
        "messages": _vision_message("Where is the sun? As JSON."),
        "max_tokens": 128,
        "response_format": fmt,
        "temperature": 0.8,
        "seed": 2,
    }
    client = _client(served)
    unary = client.chat.completions.create(**ask)
    streamed = client.chat.completions.create(stream=True, **ask)
    pieces = [c.choices[0].delta.content or "" for c in streamed if c.choices]
    assert unary.choices[0].finish_reason == "stop" and "".join(pieces) == unary.choices[0].message.content
    jsonschema.validate(json.loads(unary.choices[0].message.content), demo.IMAGE_SCHEMA)
