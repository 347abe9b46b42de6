"""The OpenAI front's token counter as perf reads it: Prometheus' text format, parsed back."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tritonkit.openai_front.metrics import FrontMetrics
from tritonkit.perf.front_counts import COMPLETION_COUNTER, FrontCounts, samples


def test_samples_read_back_what_the_front_renders_with_escaped_labels() -> None:
    metrics = FrontMetrics()
    metrics.tokens('we"ird\\m', prompt=4, completion=9, key="team-a")
    metrics.tokens('we"ird\\m', prompt=1, completion=2)
    found = [(n, labels, v) for n, labels, v in samples(metrics.render()) if n == COMPLETION_COUNTER]
    assert ({"model": 'we"ird\\m', "kind": "completion", "key": "team-a"}, 9.0) in [
        (lb, v) for _, lb, v in found
    ]
    assert sum(v for _, lb, v in found if lb["kind"] == "completion") == 11.0
    assert list(samples('# HELP x\nnot a sample line\nx_total{a="1"} 3 1700000000\n')) == [
        ("x_total", {"a": "1"}, 3.0)
    ]


@pytest.fixture
def front_metrics() -> Iterator[tuple[str, FrontMetrics]]:
    metrics = FrontMetrics()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            body = metrics.render().encode() if self.path == "/metrics" else b"no"
            self.send_response(200 if self.path == "/metrics" else 404)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", metrics
    finally:
        server.shutdown()
        server.server_close()


def test_front_counts_sum_the_models_completion_tokens_over_keys(
    front_metrics: tuple[str, FrontMetrics],
) -> None:
    url, metrics = front_metrics

    async def read() -> list[float | None]:
        counts = FrontCounts(url, "tiny_llm")
        other = FrontCounts(url + "/nowhere", "tiny_llm")
        try:
            first = await counts.completion_tokens()  # no sample yet: the family says it counts
            metrics.tokens("tiny_llm", prompt=5, completion=7, key="a")
            metrics.tokens("tiny_llm", prompt=5, completion=3, key="b")
            metrics.tokens("other", prompt=5, completion=100)
            return [first, await counts.completion_tokens(), await other.completion_tokens()]
        finally:
            await counts.close()
            await other.close()

    assert asyncio.run(read()) == [0.0, 10.0, None]


def test_front_counts_give_the_servers_tokens_per_second_between_window_edges(
    front_metrics: tuple[str, FrontMetrics],
) -> None:
    url, metrics = front_metrics

    async def run() -> tuple[list[float | None], float | None, float | None]:
        counts, off = FrontCounts(url, "m"), FrontCounts(None, "m")  # off: a run against Triton
        try:
            metrics.tokens("m", prompt=1, completion=5)
            await counts.mark(first=True)
            await off.mark(first=True)
            for made in (10, 20):
                metrics.tokens("m", prompt=1, completion=made)
                await counts.mark()
                await off.mark()
            return counts.marks, counts.per_s(1, 2, 2.0), off.per_s(0, 2, 2.0)
        finally:
            await counts.close()
            await off.close()

    marks, per_s, off = asyncio.run(run())
    assert marks == [5.0, 15.0, 35.0] and per_s == 10.0 and off is None
