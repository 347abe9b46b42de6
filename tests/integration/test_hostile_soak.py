"""A short hostile soak (benchmarks/hostile.py) against the served example pipelines.

Good and malformed requests (random bytes, truncated PNG/JPEG, zero bytes, a decompression-bomb
header, wrong data type and shape, giant and non-UTF-8 queries) mixed 4:1, over HTTP and gRPC at
concurrency 1 and 8, to all three unary pipelines: the server stays up, every good request gets
the in-process stages' answer and every bad one a 4xx. The streaming pipelines the same over gRPC
streams and SSE (plus bad MAX_TOKENS; a third of the good clients vanish after 3 pieces): every
good stream's pieces join to the right text, every bad one ends with one error naming the input,
no decoder is left generating. Bounded: 30 requests per unary step, 15 per streaming step (~25 s).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests._examples import load_example

pytestmark = pytest.mark.integration


def test_example_pipelines_survive_a_hostile_mix_and_refuse_every_bad_request_with_4xx(
    example_server: Any,
) -> None:
    hostile = load_example("benchmarks/hostile.py")
    result = hostile.soak(example_server, concurrency=(1, 8), requests=30, stream_requests=15, bad_share=0.2)
    failed = [s for s in result["steps"] if s["server_crashed"] or s["pipeline_wedged"] or s["other"]]
    assert result["server_crashes"] == 0 and result["pipelines_wedged"] == 0, failed
    assert result["good_correct_pct"] == 100.0, failed
    assert result["bad_4xx_pct"] == 100.0, failed
    assert result["streams_left_generating"] == 0, failed
    assert result["bad_requests"] == 3 * 2 * 2 * 6 + 2 * 2 * 2 * 3
    streamed = {(s["model"], s["protocol"]) for s in result["steps"]}
    assert {("vlm_stream", "sse"), ("arr_coc_stream", "grpc-stream")} <= streamed
    assert example_server.running


def test_bomb_png_header_claims_the_given_size_when_built() -> None:
    import struct

    hostile = load_example("benchmarks/hostile.py")
    data = hostile.bomb_png(60_000, 50_000)
    assert data[12:16] == b"IHDR" and struct.unpack(">II", data[16:24]) == (60_000, 50_000)
