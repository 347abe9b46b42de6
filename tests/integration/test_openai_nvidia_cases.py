"""NVIDIA's OpenAI frontend tests, put to tritonkit's front (a real tritonserver 2.51, the clock model).

triton-inference-server/server keeps the tests of its own OpenAI-compatible frontend in
``python/openai/tests/``. The requests of ``test_openai_client.py``, ``test_completions.py`` and
``test_chat_completions.py`` are put here to our front (the official ``openai`` client, sync and
async, where they use it; raw httpx where they check status codes and bodies), served before
``clock_llm_counted`` (the vLLM stage's tensors answered by the clock, with its token counts, so
``usage`` is the model's own). Facts were carried over, not code: each test's docstring names the
upstream test it mirrors. The clock model answers ``tick0 tick1 ...`` (one word per token, 32 of
them, fewer when ``max_tokens`` asks for fewer), so "one token is one word" holds exactly here.

Where our front differs, on purpose (docs/openai.md, "NVIDIA's frontend tests"):

- Invalid fields are a **400** with OpenAI's error body (``{"error": {"message", "param", ...}}``,
  ``param`` naming the field), not FastAPI's 422 with ``detail``: the OpenAI API itself answers
  400, and the official clients raise ``BadRequestError`` for it. Upstream's
  ``test_*_invalid_sampling_parameters``, ``test_*_empty_request``, ``test_*_no_model``,
  ``test_*_no_prompt``, ``test_no_prompt``, ``test_chat_completions_no_message``,
  ``test_chat_completions_empty_message`` and ``..._invalid_max_completion_tokens_...`` are
  mirrored with 400 for 422 and ``error.param`` for ``detail``.
- ``n > 1`` is served (n requests at once, at most 8): upstream's ``test_*_multiple_choices``
  expect a 400 "only single choice"; here ``n: 2`` answers two choices. ``best_of`` other than
  ``n`` is a 400, as upstream's (``best_of`` equal to ``n`` asks nothing more than ``n``).
- ``logprobs`` come from the stage's ``logprobs`` output; the clock model has none, so every
  logprobs request is a 400, as upstream's TensorRT-LLM branch of ``test_*_logprobs`` and
  ``test_*_streaming_with_logprobs``; the vLLM branch (logprobs returned) is tested against the
  real engine in test_openai_front.py. ``logit_bias`` is passed on (upstream: 400 "not supported").
- Chat ``usage`` is returned (upstream's ``test_chat_completions_defaults`` asserts none, from
  before they counted tokens; their client tests assert it, as here).
- Not applicable to a clock model (engine behaviour, not the front's): ``test_*_temperature_vllm``,
  ``test_*_temperature_tensorrtllm``, ``test_*_seed`` (the clock ignores sampling; vLLM's
  seeding is vLLM's), stop words actually cutting the text (``stop`` is passed on; the stream
  still joins to the unary answer, checked here).
- Tokenizers: our front renders chat with a Jinja chat template per model, not a Hugging Face
  tokenizer. ``test_chat_completions_no_tokenizer`` is mirrored as a model without a template
  (400 ``chat_template_missing``); ``..._custom_tokenizer`` and ``..._invalid_chat_tokenizer``
  (downloads from the Hub) have no counterpart.
- Skipped upstream ("Not Implemented Yet"), so nothing to mirror: function calling, LoRA,
  ``test_request_*``, ``test_chat_completions_streaming``.
- Other upstream files (embeddings, LoRA, model management, restricted APIs, request size,
  observability, tool calling) are not mirrored here: they need features or models this module
  does not serve (our tools, keys and limits have their own tests: test_openai_tools.py,
  test_openai_front.py).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tritonkit.openai_front import FrontServer, FrontSettings
from tritonkit.openai_front.templates import ChatTemplate

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
MODEL = "clock_llm_counted"
#: the same stage without a chat template (and without counts): upstream's "no tokenizer" case
UNTEMPLATED = "clock_llm"
PROMPT = "What is machine learning?"
MESSAGES: Any = [{"role": "user", "content": PROMPT}]
PIECES = 32


def _fast(repository: Path, name: str) -> None:
    """The clock model's pieces 1 ms apart (the default 10 ms would make this module slow)."""
    config = repository / name / "config.pbtxt"
    text = config.read_text()
    for key in ("FIRST_DELAY_MS", "GAP_MS"):
        text, found = re.subn(rf'(key: "{key}"\s*value \{{\s*string_value: )"[^"]*"', r'\g<1>"1"', text)
        assert found == 1, key
    config.write_text(text)


@pytest.fixture(scope="module")
def front(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from tritonkit.repository import build_spec
    from tritonkit.server import LocalTritonServer

    repository = tmp_path_factory.mktemp("nvidia_cases") / "model_repository"
    build_spec(ROOT / "benchmarks" / "clock_llm.yaml", repository)
    build_spec(ROOT / "benchmarks" / "clock_llm_counted.yaml", repository, force=True)
    for name in (MODEL, UNTEMPLATED):
        _fast(repository, name)
    with LocalTritonServer(repository) as server:
        template = ChatTemplate(
            "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}assistant:"
        )
        settings = FrontSettings(
            triton_url=server.grpc_url, stream_url=server.http_url, chat_templates={MODEL: template}
        )
        with FrontServer(settings) as served:
            yield served.url


@pytest.fixture(scope="module")
def client(front: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=front + "/v1", api_key="none", max_retries=0, timeout=120)


def _async_client(front: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=front + "/v1", api_key="none", max_retries=0, timeout=120)


def _post(front: str, path: str, body: Any) -> httpx.Response:
    return httpx.post(front + path, json=body, timeout=120)


def _words(text: str) -> list[str]:
    return text.strip().split()


def _check_usage(usage: Any) -> None:
    assert usage is not None
    assert isinstance(usage.prompt_tokens, int) and usage.prompt_tokens > 0
    assert isinstance(usage.completion_tokens, int) and usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


# ---- test_openai_client.py: the official client, sync and async ----


def test_client_models(client: openai.OpenAI, front: str) -> None:
    """Mirrors TestOpenAIClient/TestAsyncOpenAIClient.test_openai_client_models: every LLM
    model served is listed once (upstream: 1 for its one vLLM model; here the two clock stages)."""
    listed = sorted(model.id for model in client.models.list())
    assert listed == sorted([MODEL, UNTEMPLATED])

    async def run() -> list[str]:
        page = await _async_client(front).models.list()
        return sorted([model.id async for model in page])

    assert asyncio.run(run()) == listed


def test_client_completion(client: openai.OpenAI, front: str) -> None:
    """Mirrors test_openai_client_completion (sync and async): text, finish_reason "stop", usage
    as ints with total = prompt + completion."""
    completion = client.completions.create(model=MODEL, prompt=PROMPT)
    assert completion.choices[0].text
    assert completion.choices[0].finish_reason == "stop"
    _check_usage(completion.usage)
    assert completion.usage is not None and completion.usage.completion_tokens == PIECES
    assert completion.usage.prompt_tokens == len(PROMPT.split())

    async def run() -> Any:
        return await _async_client(front).completions.create(model=MODEL, prompt=PROMPT)

    again = asyncio.run(run())
    assert again.choices[0].text == completion.choices[0].text
    assert again.choices[0].finish_reason == "stop"
    assert again.usage == completion.usage


def test_client_chat_completion(client: openai.OpenAI, front: str) -> None:
    """Mirrors test_openai_client_chat_completion (sync and async)."""
    chat = client.chat.completions.create(model=MODEL, messages=MESSAGES)
    assert chat.choices[0].message.content
    assert chat.choices[0].finish_reason == "stop"
    _check_usage(chat.usage)

    async def run() -> Any:
        return await _async_client(front).chat.completions.create(model=MODEL, messages=MESSAGES)

    again = asyncio.run(run())
    assert again.choices[0].message.content == chat.choices[0].message.content
    assert again.choices[0].finish_reason == "stop"
    _check_usage(again.usage)


@pytest.mark.parametrize("echo", [False, True])
def test_client_completion_echo(client: openai.OpenAI, front: str, echo: bool) -> None:
    """Mirrors test_openai_client_completion_echo and test_completions.py's test_echo (raw)."""
    text = client.completions.create(model=MODEL, prompt=PROMPT, echo=echo).choices[0].text
    raw = _post(front, "/v1/completions", {"model": MODEL, "prompt": PROMPT, "echo": echo})
    assert raw.status_code == 200
    for answer in (text, raw.json()["choices"][0]["text"].strip()):
        if echo:
            assert answer.startswith(PROMPT)
        else:
            assert PROMPT not in answer


def test_completion_streaming(front: str) -> None:
    """Mirrors TestAsyncOpenAIClient.test_completion_streaming: finish_reason in exactly one
    chunk, the last one, equal to the unary answer's; the pieces join to the unary text."""

    async def run() -> tuple[Any, list[Any]]:
        client = _async_client(front)
        ask = {"model": MODEL, "prompt": PROMPT, "max_tokens": 10, "temperature": 0.0, "seed": 0}
        unary = await client.completions.create(stream=False, **ask)  # type: ignore[call-overload]
        stream = await client.completions.create(stream=True, **ask)  # type: ignore[call-overload]
        return unary, [chunk async for chunk in stream]

    unary, chunks = asyncio.run(run())
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices[0].finish_reason is not None]
    assert finishes == [unary.choices[0].finish_reason] == ["length"]  # 10 of the clock's 32
    assert chunks[-1].choices[0].finish_reason == unary.choices[0].finish_reason
    assert "".join(c.choices[0].text for c in chunks if c.choices[0].text) == unary.choices[0].text


@pytest.mark.parametrize("stop", [None, "is", ["is"], ["is", ".", ","]])
def test_chat_streaming(front: str, stop: Any) -> None:
    """Mirrors TestAsyncOpenAIClient.test_chat_streaming (with and without stop words): role
    "assistant" only, no usage in any chunk, one finish_reason (the unary one), more than one
    content piece, joined equal to the unary content."""

    async def run() -> tuple[Any, list[Any]]:
        client = _async_client(front)
        ask: dict[str, Any] = {"model": MODEL, "messages": MESSAGES, "max_completion_tokens": 64}
        ask.update(temperature=0.0, seed=0)
        if stop is not None:
            ask["stop"] = stop
        unary = await client.chat.completions.create(stream=False, **ask)
        stream = await client.chat.completions.create(stream=True, **ask)
        return unary, [chunk async for chunk in stream]

    unary, chunks = asyncio.run(run())
    pieces: list[str] = []
    finishes = []
    for chunk in chunks:
        delta = chunk.choices[0].delta
        assert delta.role in (None, "assistant")
        assert chunk.usage is None
        if delta.content:
            pieces.append(delta.content)
        if chunk.choices[0].finish_reason is not None:
            finishes.append(chunk.choices[0].finish_reason)
    assert finishes == [unary.choices[0].finish_reason]
    assert chunks[-1].choices[0].finish_reason == unary.choices[0].finish_reason
    assert len(pieces) > 1
    assert "".join(pieces) == unary.choices[0].message.content


@pytest.mark.parametrize("kind", ["chat", "completion"])
def test_streaming_usage_option(front: str, kind: str) -> None:
    """Mirrors test_chat_streaming_usage_option and test_completion_streaming_usage_option:
    include_usage false gives no usage anywhere; true gives exactly one more chunk, last, with
    empty choices and the unary call's usage; the content is the same in all three."""

    async def run() -> tuple[Any, list[Any], list[Any]]:
        client = _async_client(front)
        ask: dict[str, Any] = {"model": MODEL, "max_tokens": 16, "temperature": 0.0, "seed": 0}
        create: Any
        if kind == "chat":
            create, ask["messages"] = client.chat.completions.create, MESSAGES
        else:
            create, ask["prompt"] = client.completions.create, PROMPT
        unary = await create(stream=False, **ask)
        off = await create(stream=True, stream_options={"include_usage": False}, **ask)
        chunks_off = [chunk async for chunk in off]
        on = await create(stream=True, stream_options={"include_usage": True}, **ask)
        return unary, chunks_off, [chunk async for chunk in on]

    def text(choice: Any) -> str | None:
        return choice.delta.content if kind == "chat" else choice.text  # type: ignore[no-any-return]

    unary, chunks_off, chunks_on = asyncio.run(run())
    unary_text = unary.choices[0].message.content if kind == "chat" else unary.choices[0].text
    assert all(chunk.usage is None for chunk in chunks_off)
    assert len(chunks_on) == len(chunks_off) + 1
    assert all(chunk.usage is None for chunk in chunks_on[:-1])
    final = chunks_on[-1]
    assert final.choices == []
    _check_usage(final.usage)
    assert final.usage.model_dump() == unary.usage.model_dump()
    for chunks in (chunks_off, chunks_on[:-1]):
        assert "".join(text(c.choices[0]) or "" for c in chunks if c.choices) == unary_text


def test_stream_options_without_streaming(client: openai.OpenAI) -> None:
    """Mirrors test_stream_options_without_streaming: stream_options with stream false is a
    BadRequestError for completions and chat (our message names the field, in other words)."""
    for create, ask in (
        (client.completions.create, {"prompt": PROMPT}),
        (client.chat.completions.create, {"messages": MESSAGES}),
    ):
        with pytest.raises(openai.BadRequestError) as caught:
            create(model=MODEL, stream=False, stream_options={"include_usage": True}, **ask)
        assert caught.value.body["param"] == "stream_options"  # type: ignore[index]
        assert "stream: true" in str(caught.value)


@pytest.mark.parametrize(
    ("kind", "stream"), [("chat", False), ("chat", True), ("completion", False), ("completion", True)]
)
def test_logprobs_without_a_logprobs_output(client: openai.OpenAI, kind: str, stream: bool) -> None:
    """Mirrors test_chat_completion_logprobs, test_completion_logprobs,
    test_chat_streaming_with_logprobs and test_completion_streaming_with_logprobs on their
    TensorRT-LLM branch (a stage that returns no logprobs): a BadRequestError before any stream
    starts, naming logprobs."""
    with pytest.raises(openai.BadRequestError) as caught:
        if kind == "chat":
            client.chat.completions.create(
                model=MODEL,
                messages=MESSAGES,
                logprobs=True,
                top_logprobs=2,
                max_tokens=10,
                stream=stream,
            )
        else:
            client.completions.create(model=MODEL, prompt=PROMPT, logprobs=3, max_tokens=10, stream=stream)
    assert caught.value.status_code == 400
    assert caught.value.body["param"] == "logprobs"  # type: ignore[index]


def test_top_logprobs_requires_logprobs(client: openai.OpenAI) -> None:
    """Mirrors test_top_logprobs_requires_logprobs."""
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model=MODEL, messages=MESSAGES, top_logprobs=2, max_tokens=5)
    assert caught.value.body["param"] == "top_logprobs"  # type: ignore[index]


# ---- test_completions.py and test_chat_completions.py: raw HTTP ----


def _chat(front: str, **fields: Any) -> httpx.Response:
    return _post(front, "/v1/chat/completions", {"model": MODEL, "messages": MESSAGES, **fields})


def _completion(front: str, **fields: Any) -> httpx.Response:
    return _post(front, "/v1/completions", {"model": MODEL, "prompt": PROMPT, **fields})


def _answer(kind: str, response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    choice = response.json()["choices"][0]
    if kind == "chat":
        assert choice["message"]["role"] == "assistant"
        return str(choice["message"]["content"])
    return str(choice["text"])


def test_completions_defaults(front: str) -> None:
    """Mirrors test_completions_defaults and test_usage_response."""
    reply = _completion(front)
    assert _answer("completion", reply).strip()
    usage = reply.json()["usage"]
    assert isinstance(usage["prompt_tokens"], int) and usage["prompt_tokens"] > 0
    assert isinstance(usage["completion_tokens"], int) and usage["completion_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


@pytest.mark.parametrize(
    "messages",
    [
        MESSAGES,
        [{"role": "system", "content": "You are a Triton Inference Server expert."}, *MESSAGES],
        [{"role": "system", "content": "You are a Triton Inference Server expert."}],
        [{"role": "user", "content": [{"type": "text", "text": PROMPT}]}],
    ],
    ids=["user_str", "system_and_user", "system_only", "user_parts"],
)
def test_chat_completions_prompts(front: str, messages: list[dict[str, Any]]) -> None:
    """Mirrors test_chat_completions_defaults, _system_prompt, _system_prompt_only,
    _user_prompt_str, _user_prompt_dict and _no_streaming: 200, content, role "assistant" (and,
    unlike upstream's defaults test, usage: see the module's notes)."""
    for reply in (_chat(front, messages=messages), _chat(front, messages=messages, stream=False)):
        assert _answer("chat", reply).strip()
        assert reply.json()["usage"]["completion_tokens"] == PIECES


@pytest.mark.parametrize(
    ("kind", "key", "value"),
    [
        *[
            (kind, key, value)
            for kind in ("chat", "completion")
            for key, value in [
                ("temperature", 0.7),
                ("max_tokens", 10),
                ("top_p", 0.9),
                ("frequency_penalty", 0.5),
                ("presence_penalty", 0.2),
                ("n", 1),
                ("logit_bias", {"0": 0}),
                ("min_tokens", 16),
                ("ignore_eos", True),
            ]
        ],
        ("completion", "best_of", 1),
        ("chat", "stop", "."),
        ("chat", "stop", []),
        ("chat", "stop", [".", ","]),
        ("chat", "max_completion_tokens", 10),
    ],
)
def test_sampling_parameters(front: str, kind: str, key: str, value: Any) -> None:
    """Mirrors test_completions_sampling_parameters, test_chat_completions_sampling_parameters and
    test_chat_completions_max_completion_tokens_sampling_parameters: each is taken, 200 with text
    (logit_bias is passed on here, where upstream refuses it)."""
    send = _chat if kind == "chat" else _completion
    assert _answer(kind, send(front, **{key: value})).strip()


@pytest.mark.parametrize(
    ("kind", "field"),
    [("chat", "max_tokens"), ("chat", "max_completion_tokens"), ("completion", "max_tokens")],
)
def test_max_tokens(front: str, kind: str, field: str) -> None:
    """Mirrors test_completions_max_tokens, test_chat_completions_max_tokens,
    _max_completion_tokens and _max_completion_tokens_behavior: two answers of 1 token are one
    word each, one of 100 is longer (and at most 100)."""
    send = _chat if kind == "chat" else _completion
    short = [_words(_answer(kind, send(front, **{field: 1}))) for _ in range(2)]
    long = _words(_answer(kind, send(front, **{field: 100})))
    assert len(short[0]) == len(short[1]) == 1
    assert 1 < len(long) <= 100


def test_chat_completions_both_max_tokens_and_max_completion_tokens(front: str) -> None:
    """Mirrors test_chat_completions_both_max_tokens_and_max_completion_tokens: the newer field
    wins; a null max_completion_tokens falls back to max_tokens."""
    assert len(_words(_answer("chat", _chat(front, max_tokens=50, max_completion_tokens=5)))) == 5
    assert len(_words(_answer("chat", _chat(front, max_tokens=3, max_completion_tokens=None)))) == 3


@pytest.mark.parametrize("kind", ["chat", "completion"])
@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("temperature", 2.1),
        ("temperature", -0.1),
        ("max_tokens", -1),
        ("top_p", 1.1),
        ("frequency_penalty", 3),
        ("frequency_penalty", -3),
        ("presence_penalty", 2.1),
        ("presence_penalty", -2.1),
        ("min_tokens", -1),
        ("ignore_eos", 123),
        ("max_completion_tokens", -1),
    ],
)
def test_invalid_sampling_parameters(front: str, kind: str, key: str, value: Any) -> None:
    """Mirrors test_completions_invalid_sampling_parameters,
    test_chat_completions_invalid_sampling_parameters and
    test_chat_completions_invalid_max_completion_tokens_sampling_parameters: refused before
    anything runs (400 naming the field; upstream: FastAPI's 422)."""
    send = _chat if kind == "chat" else _completion
    reply = send(front, **{key: value})
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["param"] == key


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/v1/completions", {}, "prompt"),  # both missing: the first checked is named
        ("/v1/completions", {"prompt": PROMPT}, "model"),
        ("/v1/completions", {"model": MODEL}, "prompt"),
        ("/v1/completions", {"model": MODEL, "prompt": ""}, "prompt"),
        ("/v1/chat/completions", {"model": MODEL, "messages": []}, "messages"),
        ("/v1/chat/completions", {"model": MODEL, "messages": [{}]}, "messages[0].role"),
    ],
    ids=["empty_request", "no_model", "no_prompt", "empty_prompt", "no_message", "empty_message"],
)
def test_malformed_requests(front: str, path: str, body: dict[str, Any], param: str) -> None:
    """Mirrors test_completions_empty_request, _no_model, _no_prompt, _empty_prompt, test_no_prompt,
    test_chat_completions_no_message and _empty_message: a 400 naming what is wrong (upstream:
    422 from its schema, 400 for the empty prompt)."""
    reply = _post(front, path, body)
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["param"] == param


@pytest.mark.parametrize("fields", [{"n": 2, "best_of": 1}, {"best_of": 2}], ids=str)
def test_completions_best_of(front: str, fields: dict[str, Any]) -> None:
    """Mirrors test_completions_multiple_choices' best_of cases: best_of other than n (more would
    rank answers server-side; fewer cannot give n) is a 400 naming best_of, never ignored."""
    reply = _completion(front, **fields)
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["param"] == "best_of"


@pytest.mark.parametrize("kind", ["chat", "completion"])
def test_multiple_choices(front: str, kind: str) -> None:
    """Mirrors test_completions_multiple_choices and test_chat_completions_multiple_choices with
    n: 2, where we differ: two choices (index 0 and 1), each a whole answer, usage summed."""
    send = _chat if kind == "chat" else _completion
    extra = {} if kind == "chat" else {"best_of": 2}  # best_of equal to n is n
    for fields in ({}, extra):
        reply = send(front, n=2, max_tokens=4, **fields)
        assert reply.status_code == 200, reply.text
        choices = reply.json()["choices"]
        assert [choice["index"] for choice in choices] == [0, 1]
        texts = [c["message"]["content"] if kind == "chat" else c["text"] for c in choices]
        assert [len(_words(text)) for text in texts] == [4, 4]
        assert reply.json()["usage"]["completion_tokens"] == 8


def test_chat_completions_no_template(front: str) -> None:
    """Mirrors TestChatCompletionsTokenizers.test_chat_completions_no_tokenizer: chat to a model
    the front has no way to render a conversation for is a 400 that says so; completions still
    answer."""
    reply = _post(front, "/v1/chat/completions", {"model": UNTEMPLATED, "messages": MESSAGES})
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["code"] == "chat_template_missing"
    assert _answer("completion", _post(front, "/v1/completions", {"model": UNTEMPLATED, "prompt": PROMPT}))


def test_unknown_model(front: str, client: openai.OpenAI) -> None:
    """Upstream's fixtures name only served models; an unknown one is a 404 (NotFoundError)."""
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="no_such_model", prompt=PROMPT)
    assert (
        _post(front, "/v1/chat/completions", {"model": "no_such_model", "messages": MESSAGES}).status_code
        == 404
    )
