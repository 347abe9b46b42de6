"""Statistics and perf_analyzer's stability rule."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tritonkit.perf.stats import Window, check_stability, merge_windows, percentile, summarize_ns


def _window(throughput: float, latency_us: float, *, seconds: float = 1.0, start_s: float = 0.0) -> Window:
    n = int(round(throughput * seconds))
    start = int(start_s * 1e9)
    return Window(
        start_ns=start, end_ns=start + int(seconds * 1e9), latencies_ns=[int(latency_us * 1000)] * n
    )


@pytest.mark.parametrize("q", [0, 1, 25, 50, 90, 95, 99, 99.9, 100])
def test_percentile_matches_numpy_when_given_known_data(q: float) -> None:
    data = sorted([12.0, 3.0, 7.5, 100.0, 42.0, 42.0, 8.25, 1.0, 66.0, 5.0, 19.0])
    assert percentile(data, q) == pytest.approx(float(np.percentile(data, q)))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(min_value=0, max_value=1e9, allow_nan=False), min_size=1, max_size=300),
    st.floats(min_value=0, max_value=100),
)
def test_percentile_matches_numpy_when_given_arbitrary_data(values: list[float], q: float) -> None:
    ordered = sorted(values)
    assert percentile(ordered, q) == pytest.approx(float(np.percentile(ordered, q)), rel=1e-9, abs=1e-6)


def test_percentile_raises_when_data_is_empty_or_q_out_of_range() -> None:
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def test_summarize_reports_microseconds_matching_numpy_when_given_nanoseconds() -> None:
    rng = np.random.default_rng(7)
    ns = rng.integers(100_000, 9_000_000, size=1001)
    s = summarize_ns(ns.tolist())
    assert s is not None
    us = ns / 1000.0
    assert s.count == 1001
    assert s.avg_us == pytest.approx(us.mean())
    assert s.std_us == pytest.approx(us.std())
    assert s.min_us == pytest.approx(us.min())
    assert s.max_us == pytest.approx(us.max())
    for p in (50, 90, 95, 99):
        assert s.get(f"p{p}") == pytest.approx(np.percentile(us, p))


def test_summarize_returns_none_when_nothing_completed() -> None:
    assert summarize_ns([]) is None


def test_stability_is_stable_when_last_three_windows_agree_within_ten_percent() -> None:
    windows = [_window(50, 900), _window(100, 1000), _window(105, 1040), _window(98, 990)]
    verdict = check_stability(windows)
    assert verdict.stable
    assert verdict.reason == "stable"
    assert verdict.throughput_spread < 0.1


def test_stability_is_unstable_when_throughput_spreads_beyond_the_limit() -> None:
    windows = [_window(100, 1000), _window(130, 1000), _window(100, 1000)]
    verdict = check_stability(windows)
    assert not verdict.stable
    assert "throughput" in verdict.reason
    assert verdict.throughput_spread == pytest.approx(0.1818, abs=1e-3)


def test_stability_is_unstable_when_latency_spreads_beyond_the_limit() -> None:
    windows = [_window(100, 1000), _window(100, 1000), _window(100, 1400)]
    verdict = check_stability(windows)
    assert not verdict.stable
    assert "latency" in verdict.reason and "throughput" not in verdict.reason


def test_stability_uses_the_given_percentage_when_it_is_wider() -> None:
    windows = [_window(100, 1000), _window(130, 1000), _window(100, 1000)]
    assert check_stability(windows, percentage=20).stable


def test_stability_is_unstable_when_fewer_than_three_windows_or_one_is_empty() -> None:
    assert not check_stability([_window(100, 1000), _window(100, 1000)]).stable
    empty = Window(start_ns=0, end_ns=10**9)
    assert not check_stability([_window(100, 1000), empty, _window(100, 1000)]).stable


def test_stability_compares_a_percentile_when_asked() -> None:
    base = [_window(100, 1000) for _ in range(3)]
    base[2].latencies_ns[-2:] = [5_000_000, 5_000_000]  # two slow requests move p99, not the mean much
    assert check_stability(base, latency_stat="avg").stable
    assert not check_stability(base, latency_stat="p99").stable


def test_merge_windows_adds_requests_errors_and_time_when_merging() -> None:
    a, b = _window(10, 1000, start_s=0), _window(30, 2000, start_s=1)
    a.errors["http 503"] = 2
    b.errors["http 503"] = 1
    b.errors["timeout"] = 4
    merged = merge_windows([a, b])
    assert merged.completed == 40
    assert merged.duration_s == pytest.approx(2.0)
    assert merged.throughput == pytest.approx(20.0)
    assert dict(merged.errors) == {"http 503": 3, "timeout": 4}
    assert merged.avg_latency_us() == pytest.approx((10 * 1000 + 30 * 2000) / 40)
