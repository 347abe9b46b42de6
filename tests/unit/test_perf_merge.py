"""Records from several load workers, each on its own clock, merged into one step: windows cut
from the union of raw records on the coordinator's clock, every percentile numpy's over that
union. A merge any other way (per-worker percentiles averaged, windows cut per worker on
unshifted clocks) reads differently and fails here."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np
import pytest

from tritonkit.perf import wire
from tritonkit.perf._target import Record
from tritonkit.perf.clock import ClockOffset, estimate_offset
from tritonkit.perf.coordinator import phase_ns, split_load
from tritonkit.perf.stats import LatencySummary, merge_windows, summarize_ns
from tritonkit.perf.windows import Windows

WINDOW_NS = 1_000_000_000
#: worker clock - coordinator clock: pods on nodes booted at different times
OFFSETS_NS = (7_300_000_000_000, -2_100_000_000_000, 0)


class _PooledLoad:
    """The coordinator's drain as the runner sees it (a stand-in for TcpLoad's network part,
    which tests/integration/test_perf_tcp_workers.py runs for real): the union of every
    worker's records, already on the coordinator's clock."""

    def __init__(self, records: list[Record]) -> None:
        self.records = records

    async def drain(self) -> tuple[list[Record], float, int]:
        records, self.records = self.records, []
        return records, 0.0, 0


def _worker_rows(rng: np.random.Generator, worker: int, offset_ns: int) -> list[list[object]]:
    """A worker's raw records as they cross the wire: completion on its own clock. Each worker
    sees a different latency distribution (one is slow), as workers on different nodes do."""
    scale = (2_000_000, 5_000_000, 40_000_000)[worker]
    ends = np.sort(rng.uniform(0, 3 * WINDOW_NS, 400)).astype(np.int64)
    lats = rng.exponential(scale, 400).astype(np.int64) + 1_000_000
    return [[int(e) + offset_ns, int(lat), None, None] for e, lat in zip(ends, lats, strict=True)]


def _pings(offset_ns: int) -> list[tuple[int, int, int]]:
    """Ping samples: (sent, worker clock, received); the shortest round trip is symmetric."""
    return [
        (1000, 1000 + 50 + offset_ns, 1100),
        (2000, 2000 + 900 + offset_ns, 3000),
        (5000, 5030 + offset_ns, 5060),
    ]


def _merged_step(
    rows: Sequence[list[list[object]]], offsets: Sequence[ClockOffset]
) -> tuple[list[int], LatencySummary | None]:
    pooled: list[Record] = []
    for worker_rows, clock in zip(rows, offsets, strict=True):
        pooled.extend(wire.records_from_wire(worker_rows, clock.offset_ns))
    windows = Windows(_PooledLoad(pooled))  # type: ignore[arg-type]
    asyncio.run(windows.pull())
    cut = [windows.cut(i * WINDOW_NS, (i + 1) * WINDOW_NS) for i in range(3)]
    merged = merge_windows(cut)
    return merged.latencies_ns, summarize_ns(merged.latencies_ns)


def test_clock_offset_is_the_shortest_round_trips_middle_when_pings_vary() -> None:
    clock = estimate_offset(_pings(7_000))
    assert clock.rtt_ns == 60
    assert abs(clock.offset_ns - 7_000) <= clock.error_ns
    assert clock.to_coordinator(clock.to_worker(123_456)) == 123_456


def test_merged_percentiles_equal_numpy_over_the_union_when_workers_clocks_differ() -> None:
    rng = np.random.default_rng(54)
    rows = [_worker_rows(rng, i, off) for i, off in enumerate(OFFSETS_NS)]
    clocks = [estimate_offset(_pings(off)) for off in OFFSETS_NS]
    latencies, summary = _merged_step(rows, clocks)
    union = np.array([r[1] for worker in rows for r in worker], dtype=np.float64) / 1000.0
    assert len(latencies) == union.size  # every record of every worker, none twice
    assert summary is not None
    for q in (50, 90, 95, 99):
        assert getattr(summary, f"p{q}_us") == pytest.approx(float(np.percentile(union, q)), rel=1e-12)
    assert summary.avg_us == pytest.approx(float(union.mean()), rel=1e-12)
    assert summary.max_us == pytest.approx(float(union.max()))
    # the merge this test guards against reads differently: per-worker p99s averaged
    per_worker = [np.percentile(np.array([r[1] for r in w], dtype=np.float64) / 1000.0, 99) for w in rows]
    assert abs(float(np.mean(per_worker)) - summary.p99_us) > 0.05 * summary.p99_us


def test_windows_lose_the_workers_records_when_their_clocks_are_not_shifted() -> None:
    rng = np.random.default_rng(7)
    rows = [_worker_rows(rng, i, off) for i, off in enumerate(OFFSETS_NS)]
    unshifted = [ClockOffset(0, 0)] * len(rows)
    latencies, _ = _merged_step(rows, unshifted)
    # only the worker whose clock happens to equal the coordinator's lands in the windows
    assert len(latencies) == len(rows[2])


def test_requests_cross_the_wire_unchanged_when_they_hold_numbers_and_bytes() -> None:
    requests = [
        {
            "text_input": np.array([b"tick \xff", "caf\u00e9"], dtype=np.object_).reshape(2, 1),
            "x": np.arange(6, dtype=np.float16).reshape(2, 3),
            "flag": np.array([True]),
        }
    ]
    back = wire.decode_requests(wire.encode_requests(requests))
    assert back[0]["text_input"].tolist() == requests[0]["text_input"].tolist()
    for name in ("x", "flag"):
        assert back[0][name].dtype == requests[0][name].dtype
        np.testing.assert_array_equal(back[0][name], requests[0][name])


@pytest.mark.parametrize("total,parts", [(16, 4), (17, 4), (3, 4), (1, 1)])
def test_split_load_gives_every_slot_once_when_concurrency_does_not_divide(total: int, parts: int) -> None:
    shares = [split_load(total, parts, i, integral=True) for i in range(parts)]
    assert sum(shares) == total and max(shares) - min(shares) <= 1


def test_split_load_divides_a_request_rate_evenly_when_it_is_a_rate() -> None:
    assert [split_load(30.0, 4, i, integral=False) for i in range(4)] == [7.5] * 4


def test_rate_workers_interleave_into_one_evenly_spaced_stream_when_their_phases_are_applied() -> None:
    rate, workers = 40.0, 4
    sends = sorted(
        phase_ns("request_rate", rate, i) + k * int(1e9 / split_load(rate, workers, i, integral=False))
        for i in range(workers)
        for k in range(10)
    )
    gaps = {b - a for a, b in zip(sends, sends[1:], strict=False)}
    assert gaps == {25_000_000}  # 1/40 s apart, never four at once
    assert phase_ns("concurrency", 16, 3) == 0
