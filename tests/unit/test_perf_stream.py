"""Streaming metric definitions on synthetic response timelines (times in ns, ms = 1_000_000)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tritonkit.errors import PerfError
from tritonkit.perf._target import Record, Target
from tritonkit.perf.loadgen import LocalLoad
from tritonkit.perf.results import StepResult
from tritonkit.perf.stats import merge_windows
from tritonkit.perf.stream_metrics import (
    StreamSummary,
    Timeline,
    TokenCounter,
    is_stream_budget,
    parse_stream_budget,
    summarize_stream,
    timeline_record,
)

MS = 1_000_000


def test_timeline_record_measures_ttft_itl_and_latency_to_last_output_when_a_flags_only_final_trails() -> (
    None
):
    t = Timeline(send_ns=0, output_ns=(20 * MS, 25 * MS, 30 * MS, 35 * MS), final_ns=40 * MS)
    end, latency, error, info = timeline_record(t)
    assert error is None and info is not None
    ttft, itl, responses, tokens, tail, prompt, asked, *_client = info
    assert (prompt, asked) == (-1, -1)  # no LLM load: unknown
    assert ttft == 20 * MS
    assert itl == 5 * MS  # (35 - 20) / (4 - 1)
    assert latency == 35 * MS  # perf_analyzer 2.51: to the last response that carries outputs
    assert tail == 5 * MS  # the flags-only final is reported apart, not as latency or a token
    assert (responses, tokens) == (4, 4)
    assert end == 40 * MS  # the request completes (and falls into a window) when the stream ends


def test_timeline_record_has_no_itl_and_no_tail_when_one_final_response_carries_the_output() -> None:
    _, latency, error, info = timeline_record(Timeline(send_ns=10 * MS, output_ns=(30 * MS,)))
    assert error is None and info is not None
    assert info == (20 * MS, -1, 1, 1, -1, -1, -1, -1, 0, 0)
    assert latency == 20 * MS


def test_timeline_record_itl_is_the_mean_gap_not_the_mean_of_uneven_gaps_weighted_by_tokens() -> None:
    # gaps 1, 1, 10 ms: ITL = 12 / 3 = 4 ms whatever the token counts per response
    t = Timeline(send_ns=0, output_ns=(5 * MS, 6 * MS, 7 * MS, 17 * MS), tokens=(1, 3, 1, 2))
    _, _, _, info = timeline_record(t)
    assert info is not None and info[1] == 4 * MS and info[3] == 7


def test_timeline_record_counts_an_error_mid_stream_once_and_keeps_its_partial_timeline_out() -> None:
    t = Timeline(send_ns=0, output_ns=(20 * MS, 25 * MS), error="stream error")
    end, _, error, info = timeline_record(t)
    assert error == "stream error" and info is None and end == 25 * MS


def test_timeline_record_of_a_cancelled_request_is_an_error_without_figures() -> None:
    _, _, error, info = timeline_record(Timeline(send_ns=0, output_ns=(), error="grpc CANCELLED"))
    assert error == "grpc CANCELLED" and info is None


def test_timeline_record_of_a_stream_without_outputs_is_a_success_with_no_token_and_no_ttft() -> None:
    _, latency, error, info = timeline_record(Timeline(send_ns=0, output_ns=(), final_ns=3 * MS))
    assert error is None and info == (-1, -1, 0, 0, -1, -1, -1, -1, 0, 0) and latency == 3 * MS


def _records(*timelines: Timeline) -> list[Record]:
    return [timeline_record(t) for t in timelines]


def test_summarize_stream_reports_distributions_rates_and_tail_of_the_completed_requests() -> None:
    recs = _records(
        Timeline(send_ns=0, output_ns=(10 * MS, 12 * MS, 14 * MS), final_ns=15 * MS),
        Timeline(send_ns=0, output_ns=(30 * MS,)),  # one response: in TTFT, not in ITL
        Timeline(send_ns=0, output_ns=(20 * MS, 26 * MS), final_ns=28 * MS),
    )
    infos = [r[3] for r in recs if r[3] is not None]
    summary = summarize_stream(infos, [r[1] for r in recs], duration_s=2.0, client_cpu_s=0.012)
    assert summary.ttft is not None and summary.ttft.count == 3 and summary.ttft.p50_us == 20_000
    assert summary.itl is not None and summary.itl.count == 2
    assert sorted([summary.itl.min_us, summary.itl.max_us]) == [2_000, 6_000]
    assert summary.output_tokens is not None and summary.output_tokens.avg_us == 2.0
    assert summary.output_tokens_per_s == 3.0  # 6 tokens / 2 s
    assert summary.requests_per_s == 1.5
    assert summary.responses == 6
    assert summary.client_cpu_us_per_response == pytest.approx(2000.0)
    assert (
        summary.final_tail is not None
        and summary.final_tail.count == 2
        and summary.final_tail.max_us == 2_000
    )
    assert summary.goodput is None and not summary.client_bound


def test_summarize_stream_goodput_counts_requests_meeting_every_limit_and_checks_the_percentiles() -> None:
    recs = _records(
        Timeline(send_ns=0, output_ns=(10 * MS, 12 * MS)),  # ok
        Timeline(send_ns=0, output_ns=(50 * MS, 52 * MS)),  # TTFT too slow
        Timeline(send_ns=0, output_ns=(10 * MS, 40 * MS)),  # ITL too slow
        Timeline(send_ns=0, output_ns=(15 * MS,)),  # no ITL: only TTFT applies, ok
    )
    infos = [r[3] for r in recs if r[3] is not None]
    limits = parse_stream_budget("ttft_p99=20ms,itl_p50<=10ms")
    s = summarize_stream(infos, [r[1] for r in recs], duration_s=1.0, client_cpu_s=0.0, limits=limits)
    assert s.goodput is not None
    assert s.goodput.good_requests == 2 and s.goodput.requests_per_s == 2.0
    assert s.goodput.output_tokens_per_s == 3.0
    assert not s.goodput.meets_budget  # TTFT p99 ~ 49 ms > 20 ms
    assert s.goodput.budget == "ttft_p99<=20ms,itl_p50<=10ms"


def test_summarize_stream_flags_the_load_generator_as_the_bottleneck_when_its_cpu_is_saturated() -> None:
    infos = [(MS, MS, 2, 2, -1)] * 10
    busy = summarize_stream(infos, [2 * MS] * 10, duration_s=1.0, client_cpu_s=1.7, processes=2)
    assert busy.client_bound and busy.client_cpu_share == pytest.approx(0.85)
    idle = summarize_stream(infos, [2 * MS] * 10, duration_s=1.0, client_cpu_s=0.3)
    assert not idle.client_bound


def test_stream_summary_round_trips_through_the_step_json() -> None:
    recs = _records(Timeline(send_ns=0, output_ns=(10 * MS, 12 * MS), final_ns=13 * MS))
    infos = [r[3] for r in recs if r[3] is not None]
    summary = summarize_stream(
        infos,
        [r[1] for r in recs],
        duration_s=1.0,
        client_cpu_s=0.001,
        limits=parse_stream_budget("ttft_p99=1s"),
    )
    data = json.loads(json.dumps(summary.to_dict()))
    assert set(data) >= {"ttft_us", "itl_us", "output_tokens", "output_tokens_per_s", "goodput"}
    for key in ("ttft_us", "itl_us", "output_tokens"):
        assert set(data[key]) >= {"avg", "p50", "p90", "p95", "p99"}
    assert StreamSummary.from_dict(data) == summary


def test_parse_stream_budget_reads_units_and_refuses_what_it_cannot_read() -> None:
    limits = parse_stream_budget("ttft_p99=200ms, itl_p95<=40, latency_avg<2s")
    assert [(lim.metric, lim.stat, lim.limit_us) for lim in limits] == [
        ("ttft", "p99", 200_000.0),
        ("itl", "p95", 40_000.0),
        ("latency", "avg", 2_000_000.0),
    ]
    assert is_stream_budget("ttft_p99=1ms") and not is_stream_budget("p99=50ms")
    for bad in ("ttft=200ms", "tpot_p99=1ms", "ttft_p99=0", "ttft_p99=1ms,ttft_p50=2ms", ""):
        with pytest.raises(PerfError):
            parse_stream_budget(bad)


def test_token_counter_refuses_a_missing_file_instead_of_downloading(tmp_path: Path) -> None:
    with pytest.raises(PerfError, match="nothing is downloaded"):
        TokenCounter(str(tmp_path / "tokenizer.json"))


def test_token_counter_counts_tokens_with_a_local_tokenizer_file(tmp_path: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models, pre_tokenizers

    tok = tokenizers.Tokenizer(models.WordLevel({"hello": 0, "world": 1, "[UNK]": 2}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    counter = TokenCounter(str(path))
    assert counter.count("hello world hello") == 3
    assert counter.count("") == 0


class _ScriptedStreams:
    """A stand-in streaming sender replaying fixed timelines (no server: unit test of the
    load loop's bookkeeping in request-rate mode; the real senders are tested against
    tritonserver in tests/integration/test_perf_stream.py)."""

    def __init__(self) -> None:
        self.target = Target(
            client_url="x", ssl=False, protocol="grpc", model="m", model_version="", outputs=()
        )
        self.headers: Any = {}
        self.sent = 0

    async def open(self) -> None: ...
    async def close(self) -> None: ...

    async def send(self) -> Record:
        import time

        self.sent += 1
        start = time.monotonic_ns()
        await asyncio.sleep(0.02)
        first = time.monotonic_ns()
        await asyncio.sleep(0.01)
        last = time.monotonic_ns()
        return timeline_record(Timeline(send_ns=start, output_ns=(first, last), final_ns=last + 1))


async def test_request_rate_mode_overlaps_streams_and_records_each_with_its_own_send_time() -> None:
    sender = _ScriptedStreams()
    load = LocalLoad(sender)  # type: ignore[arg-type]
    await load.start_step("request_rate", 200.0, poisson=True)  # ~a send every 5 ms, streams last 30
    await asyncio.sleep(0.3)
    records, _, _ = await load.drain()
    await load.stop_step()
    assert len(records) >= 20  # overlapping: far more than 0.3 s / 30 ms = 10 sequential streams
    infos = [r[3] for r in records]
    assert all(i is not None for i in infos)
    # TTFT measured from each request's own send, not from the schedule: never below the 20 ms
    assert min(i[0] for i in infos if i is not None) >= 20 * MS


def test_merged_windows_keep_each_requests_stream_figures_beside_its_latency() -> None:
    from tritonkit.perf.stats import Window

    a = Window(start_ns=0, end_ns=MS, latencies_ns=[5], streams=[(1, 2, 3, 4, 5)])
    b = Window(start_ns=MS, end_ns=2 * MS, latencies_ns=[6], streams=[(7, 8, 9, 10, 11)])
    merged = merge_windows([a, b])
    assert merged.latencies_ns == [5, 6] and merged.streams == [(1, 2, 3, 4, 5), (7, 8, 9, 10, 11)]


def test_step_result_json_keeps_latency_us_and_gains_the_stream_block() -> None:
    recs = _records(Timeline(send_ns=0, output_ns=(10 * MS, 12 * MS), final_ns=13 * MS))
    infos = [r[3] for r in recs if r[3] is not None]
    stream = summarize_stream(infos, [r[1] for r in recs], duration_s=1.0, client_cpu_s=0.0)
    from tritonkit.perf.stats import summarize_ns

    step = StepResult(
        mode="concurrency",
        level=1,
        throughput=1.0,
        latency=summarize_ns([12 * MS]),
        requests=1,
        errors={},
        stable=True,
        stability="stable",
        duration_s=1.0,
        windows=(),
        server=None,
        client_cpu_us_per_request=0.0,
        client_send_us=0.0,
        client_recv_us=0.0,
        stream=stream,
    )
    data = json.loads(json.dumps(step.to_dict()))
    assert data["latency_us"]["p50"] == 12_000
    assert data["stream"]["ttft_us"]["p50"] == 10_000 and data["stream"]["itl_us"]["p99"] == 2_000
    assert StepResult.from_dict(data) == step


async def test_request_rate_mode_loses_no_record_of_a_request_in_flight_across_a_drain() -> None:
    sender = _ScriptedStreams()  # each stream lasts ~30 ms; drains every 10 ms always cut some
    load = LocalLoad(sender)  # type: ignore[arg-type]
    await load.start_step("request_rate", 100.0, poisson=False)
    got = 0
    for _ in range(30):
        await asyncio.sleep(0.01)
        got += len((await load.drain())[0])
    load._running = False  # stop sending; let the streams in flight finish, then drain them
    await asyncio.sleep(0.1)
    got += len((await load.drain())[0])
    await load.stop_step()
    assert sender.sent > 20 and got == sender.sent


def _stream_run(*, client_cpu_s: float = 0.001, delayed: int = 0) -> Any:
    from tritonkit.perf.results import PerfRun
    from tritonkit.perf.stats import summarize_ns

    recs = _records(
        Timeline(send_ns=0, output_ns=(20 * MS, 25 * MS, 30 * MS), final_ns=32 * MS),
        Timeline(send_ns=0, output_ns=(22 * MS, 28 * MS, 34 * MS), final_ns=35 * MS),
    )
    infos = [r[3] for r in recs if r[3] is not None]
    lat = [r[1] for r in recs]
    stream = summarize_stream(infos, lat, duration_s=1.0, client_cpu_s=client_cpu_s)
    step = StepResult(
        mode="concurrency", level=2, throughput=2.0, latency=summarize_ns(lat), requests=2, errors={},
        stable=True, stability="stable", duration_s=1.0, windows=(), server=None,
        client_cpu_us_per_request=0.0, client_send_us=0.0, client_recv_us=0.0, stream=stream,
        delayed_requests=delayed,
    )  # fmt: skip
    return PerfRun(url="grpc://x", model="m", protocol="grpc", mode="concurrency", steps=(step,))


def test_csv_of_a_streamed_run_keeps_perf_analyzers_columns_first_and_adds_the_streaming_ones() -> None:
    import csv
    import io

    from tritonkit.perf.results import CSV_HEADER, STREAM_CSV_HEADER, to_csv

    rows = list(csv.reader(io.StringIO(to_csv(_stream_run()))))
    assert tuple(rows[0]) == CSV_HEADER + STREAM_CSV_HEADER
    row = dict(zip(rows[0], rows[1], strict=True))
    assert row["TTFT p50"] == "21000" and row["ITL p50"] == "5500" and row["Output Tokens avg"] == "3.00"
    assert row["Output Tokens/Second"] == "6.00" and row["Final Response Tail p50"] == "1500"


def test_report_names_a_client_bound_step_and_says_how_tokens_were_counted() -> None:
    from tritonkit.perf.report import client_bound_note, render_markdown

    assert client_bound_note(_stream_run()) is None
    busy = _stream_run(client_cpu_s=0.95)
    note = client_bound_note(busy)
    assert note is not None and "level 2" in note and "--workers" in note
    assert "sends left late" in (client_bound_note(_stream_run(delayed=3)) or "")
    text = render_markdown(busy, plot_file=None)
    assert "## Streaming" in text and "one response = one token" in text and "may limit" in text
