"""LLM-decoder pipelines composed by the caller (``client/composed.py``), on a real tritonserver 2.51.

The repository is the demo's pipelines (``vlm_llm``, ``arr_coc_llm``: vision stages -> prompt ->
LLM stage) over a stand-in for the vLLM stage that answers by the clock
(``benchmarks/clock_tiny_llm.yaml``: the stage's whole tensor contract, any number of answers at
once). Two OpenAI fronts stand before it: one composes the pipelines (the default), one lets the
pipeline's Python front door answer (``compose_pipelines=False``). What a client sees is the
same on both (text, usage, finish reason, refusals); the composing front streams more answers at
once than the front door has instances; a client that leaves cancels the stage's request; and
tritonkit's client composes the same answer for gRPC callers.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from tests.integration.test_server_local import wait_until
from tritonkit.openai_front import FrontServer, FrontSettings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "ensembles" / "assets" / "sample.png"
IMAGE_URL = "data:image/png;base64," + base64.b64encode(SAMPLE.read_bytes()).decode()
QUESTIONS = {"vlm_llm": "Describe the image.", "arr_coc_llm": "Where is the sun?"}
GAP_MS = 40  # one piece every 40 ms: an answer of 128 pieces takes ~5 s
CUT_STAGE = "tiny_llm_cut"


def _set_parameters(config: Path, **parameters: Any) -> None:
    text = config.read_text()
    for key, value in parameters.items():
        text, found = re.subn(
            rf'(key: "{key}"\s*value \{{\s*string_value: )"[^"]*"', rf'\g<1>"{value}"', text
        )
        if not found:
            text += f'parameters {{\n  key: "{key}"\n  value {{\n    string_value: "{value}"\n  }}\n}}\n'
    config.write_text(text)


def build_composed_repository(where: Path) -> tuple[Path, Path]:
    """The pipelines over the clock stage under ``where`` (one piece every ``GAP_MS``); returns
    the repository and the file where the stage logs each request Triton cancelled (shared with
    ``test_perf_composed.py``)."""
    from tritonkit.repository import build_spec

    repository = where / "model_repository"
    for spec in ("ensembles/vlm.yaml", "ensembles/arr_coc.yaml", "benchmarks/clock_tiny_llm.yaml",
                 "ensembles/vlm_llm.yaml", "ensembles/arr_coc_llm.yaml"):  # fmt: skip
        build_spec(ROOT / spec, repository, force=True)
    cancelled = where / "cancelled.log"
    _set_parameters(repository / "tiny_llm" / "config.pbtxt", GAP_MS=GAP_MS, CANCELLED_LOG=cancelled)
    # the same stage answering as a stream whose tail the server lost: 3 pieces, then the final
    # flag without a finish reason (the clock's CUT_AFTER)
    cut = repository / CUT_STAGE
    shutil.copytree(repository / "tiny_llm", cut)
    config = cut / "config.pbtxt"
    config.write_text(config.read_text().replace('name: "tiny_llm"', f'name: "{CUT_STAGE}"', 1))
    _set_parameters(config, CUT_AFTER=3)
    return repository, cancelled


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from tritonkit.server import LocalTritonServer

    repository, cancelled = build_composed_repository(tmp_path_factory.mktemp("composed"))
    with LocalTritonServer(repository) as server:
        composing = FrontSettings(triton_url=server.grpc_url, stream_url=server.http_url)
        door = FrontSettings(triton_url=server.grpc_url, stream_url=server.http_url, compose_pipelines=False)
        with FrontServer(composing) as front, FrontServer(door) as front_door:
            yield {"server": server, "front": front, "door": front_door, "cancelled": cancelled}


def _chat(model: str, **extra: Any) -> dict[str, Any]:
    content = [
        {"type": "text", "text": QUESTIONS[model]},
        {"type": "image_url", "image_url": {"url": IMAGE_URL}},
    ]
    return {"model": model, "messages": [{"role": "user", "content": content}], **extra}


def _streamed(url: str, body: dict[str, Any]) -> tuple[str, str | None, dict[str, Any] | None]:
    """A streamed chat's text, finish reason and usage (read from its SSE events)."""
    text, reason, usage = [], None, None
    with (
        httpx.Client(timeout=120) as client,
        client.stream("POST", url + "/v1/chat/completions", json=body) as r,
    ):
        assert r.status_code == 200, r.read()
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            assert "error" not in event, event
            for choice in event.get("choices", []):
                text.append(choice["delta"].get("content") or "")
                reason = choice.get("finish_reason") or reason
            usage = event.get("usage") or usage
    return "".join(text), reason, usage


@pytest.mark.parametrize("model", list(QUESTIONS))
def test_composed_pipeline_answers_as_its_front_door_when_streamed_and_unary(
    served: dict[str, Any], model: str
) -> None:
    front, door = served["front"].url, served["door"].url
    opts = {"max_tokens": 6, "stream_options": {"include_usage": True}}
    ours = _streamed(front, _chat(model, stream=True, **opts))
    theirs = _streamed(door, _chat(model, stream=True, **opts))
    assert ours == theirs
    assert ours[0] == "".join(f"tick{i} " for i in range(6)) and ours[1] == "length"
    assert ours[2] is not None and ours[2]["completion_tokens"] == 6 and ours[2]["prompt_tokens"] > 0
    unary = [
        httpx.post(u + "/v1/chat/completions", json=_chat(model, max_tokens=3), timeout=120)
        for u in (front, door)
    ]
    assert [r.status_code for r in unary] == [200, 200]
    answers = [(r.json()["choices"][0]["message"]["content"], r.json()["usage"]) for r in unary]
    assert answers[0] == answers[1] and answers[0][0] == "tick0 tick1 tick2 "


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"max_tokens": 1000}, "MAX_TOKENS is 1000; this pipeline generates at most 128"),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "hi"},
                            {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGVsbG8="}},
                        ],
                    }
                ]
            },
            "not an image",
        ),
    ],  # fmt: skip
    ids=["max-tokens-past-the-limit", "not-an-image"],
)
def test_composed_pipeline_refuses_what_its_front_door_refuses_with_a_400_when_the_request_is_bad(
    served: dict[str, Any], change: dict[str, Any], says: str
) -> None:
    for url in (served["front"].url, served["door"].url):
        for stream in (False, True):
            body = {**_chat("vlm_llm", stream=stream), **change}
            r = httpx.post(url + "/v1/chat/completions", json=body, timeout=120)
            assert r.status_code == 400, (url, r.text)
            assert says in r.json()["error"]["message"]


def test_composing_front_streams_more_answers_at_once_than_the_front_door_has_instances(
    served: dict[str, Any],
) -> None:
    """16 streams of 128 pieces at once (the front door has 8 instances, one stream each): every
    first piece comes before any answer ends, which a front door of 8 cannot do (its 9th caller
    waits for a whole answer)."""
    url = served["front"].url
    events: list[tuple[str, int]] = []

    async def one(i: int, client: httpx.AsyncClient) -> None:
        body = _chat("vlm_llm", stream=True, max_tokens=128)
        async with client.stream("POST", url + "/v1/chat/completions", json=body) as r:
            assert r.status_code == 200
            first = True
            async for chunk in r.aiter_text():
                if first and "tick" in chunk:
                    events.append(("first", i))
                    first = False
            events.append(("end", i))

    async def main() -> None:
        async with httpx.AsyncClient(timeout=300) as client:
            await asyncio.gather(*(one(i, client) for i in range(16)))

    asyncio.run(main())
    kinds = [kind for kind, _ in events]
    assert kinds.count("first") == 16 and kinds.count("end") == 16
    assert kinds.index("end") > max(i for i, kind in enumerate(kinds) if kind == "first"), events


def _cancelled(served: dict[str, Any]) -> list[int]:
    log: Path = served["cancelled"]
    return [int(line) for line in log.read_text().split()] if log.exists() else []


def test_client_leaving_a_composed_answer_cancels_the_stages_request_and_the_front_serves_on(
    served: dict[str, Any],
) -> None:
    front = served["front"]
    before = len(_cancelled(served))
    data = json.dumps(_chat("vlm_llm", stream=True, max_tokens=128)).encode()
    with socket.create_connection(("127.0.0.1", front.port)) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Connection: close\r\nContent-Length: %d\r\n\r\n%b" % (len(data), data)
        )
        got = b""
        while got.count(b"tick") < 3:
            chunk = sock.recv(65536)
            assert chunk, got
            got += chunk
    # 128 pieces would take ~5 s more: the stage logs the request Triton cancelled before its end
    assert wait_until(lambda: len(_cancelled(served)) == before + 1, 60), "the stage never saw the cancel"
    assert _cancelled(served)[-1] < 128
    assert wait_until(
        lambda: "tritonkit_openai_requests_active 0" in httpx.get(front.url + "/metrics").text, 30
    )
    again = _streamed(front.url, _chat("vlm_llm", stream=True, max_tokens=2))
    assert again[0] == "tick0 tick1 "


def test_client_library_composes_the_pipelines_answer_as_plain_grpc_streams_get_it(
    served: dict[str, Any],
) -> None:
    from tritonkit.client import AsyncTritonClient, TritonClient
    from tritonkit.client.composed import stream_composed
    from tritonkit.llm_pipeline import composed_pipeline

    server = served["server"]
    inputs = {
        "RAW_IMAGE": np.frombuffer(SAMPLE.read_bytes(), dtype=np.uint8),
        "TEXT_QUERY": np.array([QUESTIONS["vlm_llm"].encode()], dtype=np.object_),
        "MAX_TOKENS": np.array([5], dtype=np.int32),
    }
    with TritonClient(server.grpc_url, protocol="grpc") as plain:
        door = [dict(r.outputs) for r in plain.stream("vlm_llm", inputs)]

    async def composed() -> list[dict[str, Any]]:
        client = AsyncTritonClient(server.grpc_url, protocol="grpc")
        try:
            pipeline = composed_pipeline(await client.model_config("vlm_llm"))
            assert pipeline is not None
            return [dict(r.outputs) async for r in stream_composed(client, pipeline, inputs)]
        finally:
            await client.close()

    ours = asyncio.run(composed())

    def texts(rs: list[dict[str, Any]]) -> list[str]:
        return [r["GENERATED_TEXT"].reshape(-1)[0].decode() for r in rs if "GENERATED_TEXT" in r]

    assert texts(ours) == texts(door) == [f"tick{i} " for i in range(5)]
    last_ours = next(r for r in reversed(ours) if "PROMPT_TOKENS" in r)
    last_door = next(r for r in reversed(door) if "PROMPT_TOKENS" in r)
    for name in ("PROMPT_TOKENS", "COMPLETION_TOKENS", "FINISH_REASON"):
        assert last_ours[name].reshape(-1)[0] == last_door[name].reshape(-1)[0], name


def test_client_library_refuses_a_composed_answer_whose_stream_ends_without_its_last_piece(
    served: dict[str, Any],
) -> None:
    """A stage stream that ends (final flag) after 3 pieces and no finish reason, as an answer
    whose tail tritonserver 2.51's HTTP frontend lost: the composed client raises a server-class
    error after the pieces that came, on both clients, instead of a shorter answer as if whole."""
    from dataclasses import replace

    from tritonkit.client import AsyncTritonClient, TritonClient
    from tritonkit.client.composed import open_composed, stream_composed
    from tritonkit.errors import StreamCutShortError
    from tritonkit.llm_pipeline import composed_pipeline

    server = served["server"]
    inputs = {
        "RAW_IMAGE": np.frombuffer(SAMPLE.read_bytes(), dtype=np.uint8),
        "TEXT_QUERY": np.array([QUESTIONS["vlm_llm"].encode()], dtype=np.object_),
        "MAX_TOKENS": np.array([8], dtype=np.int32),
    }

    async def composed(stage: str) -> list[str]:
        client = AsyncTritonClient(server.http_url)  # the transport that loses tails on 2.51
        texts: list[str] = []
        try:
            pipeline = composed_pipeline(await client.model_config("vlm_llm"))
            assert pipeline is not None
            async for r in stream_composed(client, replace(pipeline, llm_model=stage), inputs):
                texts.append(r.text("GENERATED_TEXT"))
        except StreamCutShortError as exc:
            assert f"LLM stage '{stage}'" in str(exc)
            assert texts == ["tick0 ", "tick1 ", "tick2 "]  # the pieces that came, then the error
            return []
        finally:
            await client.close()
        return texts

    assert asyncio.run(composed("tiny_llm")) == [f"tick{i} " for i in range(8)]  # whole: no error
    assert asyncio.run(composed(CUT_STAGE)) == []  # cut: the error came

    with TritonClient(server.grpc_url, protocol="grpc") as client:
        pipeline = composed_pipeline(client.model_config("vlm_llm"))
        assert pipeline is not None
        stream = open_composed(client, replace(pipeline, llm_model=CUT_STAGE), inputs)
        got: list[str] = []
        with pytest.raises(StreamCutShortError, match="ended without the last piece"):
            for r in stream:
                got.append(r.text("GENERATED_TEXT"))
        assert got == ["tick0 ", "tick1 ", "tick2 "]


def _run_cli(argv: list[str]) -> int:
    from tritonkit.cli.app import main

    try:
        main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


@pytest.mark.parametrize("compose", [True, False], ids=["composed", "front-door"])
def test_cli_infer_stream_prints_the_pipelines_answer_composed_or_through_its_front_door(
    served: dict[str, Any], compose: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    url = served["server"].grpc_url
    argv = ["infer", url, "vlm_llm", "-p", "grpc", "--stream", "-o", "GENERATED_TEXT",
            "-i", f"RAW_IMAGE={SAMPLE}", "-i", "TEXT_QUERY=Describe the image.",
            "-i", "MAX_TOKENS=[4]"]  # fmt: skip
    assert _run_cli([*argv, "--compose" if compose else "--no-compose"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "tick0 tick1 tick2 tick3 \n"
    assert "4 piece(s), first after" in captured.err


def test_cli_infer_stream_refuses_a_limit_past_the_pipelines_with_a_message_not_a_traceback(
    served: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    url = served["server"].grpc_url
    argv = ["infer", url, "vlm_llm", "-p", "grpc", "--stream",
            "-i", f"RAW_IMAGE={SAMPLE}", "-i", "TEXT_QUERY=hi", "-i", "MAX_TOKENS=[1000]"]  # fmt: skip
    assert _run_cli(argv) == 1
    err = capsys.readouterr().err
    assert "MAX_TOKENS is 1000; this pipeline generates at most 128" in err and "Traceback" not in err
