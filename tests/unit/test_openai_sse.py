"""SSE framing a standard reader splits back, and the front's Prometheus text."""

from __future__ import annotations

import json

from tritonkit.client._stream import SseParser
from tritonkit.openai_front import sse
from tritonkit.openai_front.metrics import FrontMetrics


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
    metrics.finished("m", "chat", 200, 0.3)
    metrics.started()
    metrics.finished('we"ird', "completions", 400, None)
    text = metrics.render()
    assert 'tritonkit_openai_requests_total{model="m",endpoint="chat",status="200"} 1' in text
    assert 'tritonkit_openai_requests_total{model="we\\"ird",endpoint="completions",status="400"} 1' in text
    assert "tritonkit_openai_requests_active 0" in text
    assert 'tritonkit_openai_tokens_total{model="m",kind="completion"} 7' in text
    assert 'tritonkit_openai_time_to_first_token_seconds_bucket{model="m",le="0.01"} 0' in text
    assert 'tritonkit_openai_time_to_first_token_seconds_bucket{model="m",le="0.025"} 1' in text
    assert 'tritonkit_openai_request_duration_seconds_bucket{model="m",le="+Inf"} 1' in text
    assert 'tritonkit_openai_request_duration_seconds_count{model="m"} 1' in text
