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
    pieces: list[str],
    *,
    fail: Exception | None = None,
    chat: bool = True,
    usage: bool = False,
    paced: bool = True,
    choices: int = 1,
) -> list[Any]:
    """The events Service writes for one choice answering ``pieces`` (then failing with ``fail``),
    parsed back. No Triton here: the choice's pieces are handed in as its run would yield them.

    ``paced``: each piece comes once the chunk before it was taken (a client keeping up); else all
    of them come at once (a client still busy with the first chunk). ``choices`` > 1: more
    choices (n), the others answering nothing."""
    signature = ModelSignature(name="m", version="", max_batch_size=0, inputs=(), outputs=())
    engine = LlmEngine(token_counts=True, logprobs=False, finish_reason=False)
    target = Target("m", signature, 0, engine=engine)
    runs = [
        ChoiceRun(client=None, target=target, ask=Ask("p", Sampling()), limits=Limits())  # type: ignore[arg-type]
        for _ in range(choices)
    ]
    for i, run in enumerate(runs):
        run.prompt_tokens, run.completion_tokens, run.finish_reason = 3, 2 if i == 0 else 0, "length"
    prepared = Prepared(target, runs, chat=chat, stream=True, include_usage=usage)
    service = Service(None, None, limits=Limits(), fetcher=None, metrics=FrontMetrics())  # type: ignore[arg-type]

    async def collect() -> bytes:
        taken = asyncio.Event()

        async def deltas() -> AsyncGenerator[Delta, None]:
            for i, text in enumerate(pieces):
                if paced and i:
                    await taken.wait()
                    taken.clear()
                yield Delta(text)
            if fail is not None:
                raise fail

        async def nothing() -> AsyncGenerator[Delta, None]:
            for _ in ():
                yield Delta("")

        runs[0].deltas = deltas  # type: ignore[method-assign]
        for other in runs[1:]:
            other.deltas = nothing  # type: ignore[method-assign]
        chunks = []
        async for chunk in await service.open_stream(prepared, 0.0):
            chunks.append(chunk)
            taken.set()
        return b"".join(chunks)

    wire = asyncio.run(collect()).decode()
    return [
        e.data if e.data == "[DONE]" else json.loads(e.data) for e in SseParser().events(wire.split("\n"))
    ]


def test_chat_stream_opens_with_the_role_then_content_then_finish_then_usage_then_done() -> None:
    events = _stream_of(["Hel", "lo"], usage=True)
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
    events = _stream_of(["Hel"], fail=InferenceError("engine died", status="INTERNAL"), chat=False)
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

    async def answer() -> AsyncGenerator[Delta, None]:
        yield Delta("hi")

    for run in runs:
        run.deltas = answer  # type: ignore[method-assign]

    async def collect() -> bytes:
        return b"".join([c async for c in await service.open_stream(prepared, 0.0)])

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


def test_pieces_that_come_while_the_client_is_busy_go_out_as_one_event_with_every_token() -> None:
    """With n > 1 each choice is read by a task of its own while the client is written to."""
    pieces = ["Hel", "lo", ", ", "wörld", '"!"\n']
    for chat in (True, False):
        paced = _stream_of(pieces, chat=chat, usage=True, choices=2)
        piled = _stream_of(pieces, chat=chat, usage=True, paced=False, choices=2)
        key = "delta" if chat else None

        def texts(events: list[Any], key: str | None = key) -> list[str]:
            choices = [e["choices"][0] for e in events[:-1] if e["choices"] and e["choices"][0]["index"] == 0]
            pieces = [c for c in choices if c["finish_reason"] is None]
            got = [(c[key].get("content") if key else c["text"]) for c in pieces]
            return [t for t in got if t]

        assert texts(paced) == pieces
        assert texts(piled) == ["".join(pieces)]
        for events in (paced, piled):  # the same ending: finish_reason, usage, [DONE]
            reasons = [e["choices"][0]["finish_reason"] for e in events[:-2] if e["choices"]]
            assert reasons.count("length") == 2  # each choice ends once
            assert events[-2]["usage"] == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
            assert events[-1] == "[DONE]"


def test_chunk_template_writes_the_bytes_event_writes_for_the_whole_chunk() -> None:
    head = {"id": "cmpl-1", "object": "x", "created": 7, "model": 'm"ü', "system_fingerprint": None}
    for chat in (True, False):
        for usage in (True, False):
            template = sse.ChunkTemplate(head, chat=chat, usage_slot=usage)
            base = {**head, "object": "chat.completion.chunk" if chat else "text_completion"}
            slot = {"usage": None} if usage else {}
            for text in ("", "plain", 'q"uote\\', "new\nline\ttab\x00\x1f", "ünï 漢字 🙂", "\u2028"):
                choice: dict[str, Any] = {"index": 3, "logprobs": None, "finish_reason": None}
                choice.update({"delta": {"content": text}} if chat else {"text": text})
                assert template.text(3, text) == sse.event({**base, "choices": [choice], **slot})
