"""SSE framing a standard reader splits back, and the front's Prometheus text."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator
from typing import Any

from tritonkit.client._stream import SseParser
from tritonkit.errors import InferenceError
from tritonkit.openai_front import Limits, sse
from tritonkit.openai_front.generate import Ask, ChoiceRun, Delta
from tritonkit.openai_front.mapping import LlmEngine, PipelineMapping
from tritonkit.openai_front.metrics import FrontMetrics
from tritonkit.openai_front.models import Target
from tritonkit.openai_front.requests import Sampling
from tritonkit.openai_front.service import Prepared, Service
from tritonkit.signature import ModelSignature


def test_sse_events_split_back_into_the_same_payloads_then_done() -> None:
    payloads = [{"choices": [{"delta": {"content": "line one\nline two"}}]}, {"text": "ünï \r\n data: x"}]
    wire = b"".join(sse.event(p) for p in payloads) + sse.DONE
    parser = SseParser()
    events = list(parser.events(wire.decode("utf-8").split("\n")))
    assert [json.loads(e.data) for e in events[:-1]] == payloads
    assert events[-1].data == "[DONE]"
    assert all(
        chunk.startswith(b"data: ") and chunk.count(b"\n") == 2 for chunk in (sse.event(p) for p in payloads)
    )


def test_front_metrics_render_counters_and_cumulative_histograms() -> None:
    metrics = FrontMetrics()
    metrics.started()
    metrics.first_token("m", 0.02)
    metrics.tokens("m", prompt=5, completion=7)
    metrics.tokens("m", prompt=2, completion=3, key="team-a")
    metrics.tokens("m", prompt=1, completion=1, key="team-a")
    metrics.finished("m", "chat", 200, 0.3)
    metrics.started()
    metrics.finished('we"ird', "completions", 400, None, key="team-a")
    text = metrics.render()
    assert 'tritonkit_openai_requests_total{model="m",endpoint="chat",status="200",key="none"} 1' in text
    assert (
        'tritonkit_openai_requests_total{model="we\\"ird",endpoint="completions",status="400",key="team-a"} 1'
        in text
    )
    assert "tritonkit_openai_requests_active 0" in text
    assert 'tritonkit_openai_tokens_total{model="m",kind="completion",key="none"} 7' in text
    assert 'tritonkit_openai_tokens_total{model="m",kind="prompt",key="team-a"} 3' in text
    assert 'tritonkit_openai_tokens_total{model="m",kind="completion",key="team-a"} 4' in text
    assert 'tritonkit_openai_time_to_first_token_seconds_bucket{model="m",le="0.01"} 0' in text
    assert 'tritonkit_openai_time_to_first_token_seconds_bucket{model="m",le="0.025"} 1' in text
    assert 'tritonkit_openai_request_duration_seconds_bucket{model="m",le="+Inf"} 1' in text
    assert 'tritonkit_openai_request_duration_seconds_count{model="m"} 1' in text


def _stream_of(
    items: list[Any], *, fail: Exception | None = None, chat: bool = True, usage: bool = False
) -> list[Any]:
    """The events Service writes for ``items`` ((choice, Delta or None) pairs), parsed back.

    No Triton here: the pieces are handed in as the merged choices would yield them."""
    signature = ModelSignature(name="m", version="", max_batch_size=0, inputs=(), outputs=())
    engine = LlmEngine(token_counts=True, logprobs=False, finish_reason=False)
    target = Target("m", signature, 0, engine=engine)
    run = ChoiceRun(client=None, target=target, ask=Ask("p", Sampling()), limits=Limits())  # type: ignore[arg-type]
    run.prompt_tokens, run.completion_tokens, run.finish_reason = 3, 2, "length"
    prepared = Prepared(target, [run], chat=chat, stream=True, include_usage=usage)
    service = Service(None, None, limits=Limits(), fetcher=None, metrics=FrontMetrics())  # type: ignore[arg-type]

    async def pieces() -> AsyncGenerator[Any, None]:
        for item in items[1:]:
            yield item
        if fail is not None:
            raise fail

    async def collect() -> bytes:
        return b"".join([chunk async for chunk in service._events(prepared, pieces(), items[0])])

    wire = asyncio.run(collect()).decode()
    return [
        e.data if e.data == "[DONE]" else json.loads(e.data) for e in SseParser().events(wire.split("\n"))
    ]


def test_chat_stream_opens_with_the_role_then_content_then_finish_then_usage_then_done() -> None:
    events = _stream_of([(0, Delta("Hel")), (0, Delta("lo")), (0, None)], usage=True)
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert [e["choices"][0]["delta"].get("content") for e in events[1:3]] == ["Hel", "lo"]
    assert events[3]["choices"][0]["finish_reason"] == "length" and events[3]["usage"] is None
    assert events[4]["choices"] == [] and events[4]["usage"] == {
        "prompt_tokens": 3,
        "completion_tokens": 2,
        "total_tokens": 5,
    }
    assert events[5] == "[DONE]"
    assert {e["object"] for e in events[:5]} == {"chat.completion.chunk"}


def test_stream_failing_after_its_first_byte_ends_with_an_openai_error_event() -> None:
    events = _stream_of(
        [(0, Delta("Hel"))], fail=InferenceError("engine died", status="INTERNAL"), chat=False
    )
    assert events[0]["choices"][0]["text"] == "Hel" and events[0]["object"] == "text_completion"
    assert events[-1]["error"]["code"] == "upstream_error" and "[DONE]" not in events


def test_front_meters_a_streams_tokens_by_key_id_also_when_the_client_asked_no_usage() -> None:
    signature = ModelSignature(name="m", version="", max_batch_size=0, inputs=(), outputs=())
    target = Target(
        "m", signature, 0, engine=LlmEngine(token_counts=True, logprobs=False, finish_reason=False)
    )
    runs = []
    for _ in range(2):  # n=2: the prompt once, the choices' completions summed
        run = ChoiceRun(client=None, target=target, ask=Ask("p", Sampling()), limits=Limits())  # type: ignore[arg-type]
        run.prompt_tokens, run.completion_tokens = 3, 2
        runs.append(run)
    prepared = Prepared(target, runs, chat=True, stream=True, include_usage=False, key="team-a")
    metrics = FrontMetrics()
    service = Service(None, None, limits=Limits(), fetcher=None, metrics=metrics)  # type: ignore[arg-type]

    async def pieces() -> AsyncGenerator[Any, None]:
        yield 1, None

    async def collect() -> bytes:
        return b"".join([c async for c in service._events(prepared, pieces(), (0, None))])

    wire = asyncio.run(collect())
    assert b'"usage"' not in wire  # not asked: not sent, but counted all the same
    text = metrics.render()
    assert 'tritonkit_openai_tokens_total{model="m",kind="prompt",key="team-a"} 3' in text
    assert 'tritonkit_openai_tokens_total{model="m",kind="completion",key="team-a"} 4' in text


def test_model_card_says_whether_answers_carry_the_models_own_usage() -> None:
    signature = ModelSignature(name="m", version="", max_batch_size=0, inputs=(), outputs=())
    counting = PipelineMapping("Q", "A", prompt_tokens_output="P", completion_tokens_output="C")
    cards = [
        Target("llm", signature, 0, engine=LlmEngine(token_counts=True, logprobs=False, finish_reason=True)),
        Target("vlm", signature, 0, pipeline=PipelineMapping("Q", "A")),
        Target("vlm_llm", signature, 0, pipeline=counting),
    ]
    assert [c.card()["tritonkit"] for c in cards] == [
        {"kind": "llm-engine", "usage": "engine"},
        {"kind": "pipeline", "usage": "none"},
        {"kind": "pipeline", "usage": "engine"},
    ]
