"""Latency statistics and perf_analyzer's stability rule.

Latencies are kept in nanoseconds while measuring and reported in microseconds, the unit
perf_analyzer uses in its CSV.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields

from tritonkit._records import JsonRecord


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) of already sorted values, by linear interpolation.

    Same definition as ``numpy.percentile``'s default ("linear"), so the numbers match what a
    user gets from numpy on the raw latencies.
    """
    if not sorted_values:
        raise ValueError("percentile of an empty sequence")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile must be within 0..100, got {q}")
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = math.ceil(pos)
    if lo == hi:
        return float(sorted_values[lo])
    frac = pos - lo
    return float(sorted_values[lo]) * (1.0 - frac) + float(sorted_values[hi]) * frac


@dataclass(frozen=True)
class LatencySummary(JsonRecord):
    """Latency of completed requests, in microseconds."""

    count: int
    avg_us: float
    std_us: float
    min_us: float
    max_us: float
    p50_us: float
    p90_us: float
    p95_us: float
    p99_us: float

    def get(self, name: str) -> float:
        """A statistic by its short name: avg, min, max, p50, p90, p95, p99."""
        try:
            return float(getattr(self, f"{name}_us"))
        except AttributeError:
            raise KeyError(name) from None


#: its JSON keys are the statistics' short names (``p99``, not ``p99_us``)
LatencySummary._record_keys = {f.name: f.name.removesuffix("_us") for f in fields(LatencySummary)}


def summarize_ns(latencies_ns: Iterable[int | float]) -> LatencySummary | None:
    """Summarize latencies given in nanoseconds; None when there are none."""
    return summarize_values(float(v) / 1000.0 for v in latencies_ns)


def summarize_values(raw: Iterable[int | float]) -> LatencySummary | None:
    """Summarize values as they are (microseconds, or counts such as tokens per request)."""
    values = sorted(float(v) for v in raw)
    n = len(values)
    if n == 0:
        return None
    avg = math.fsum(values) / n
    var = math.fsum((v - avg) ** 2 for v in values) / n
    return LatencySummary(
        count=n,
        avg_us=avg,
        std_us=math.sqrt(var),
        min_us=values[0],
        max_us=values[-1],
        p50_us=percentile(values, 50),
        p90_us=percentile(values, 90),
        p95_us=percentile(values, 95),
        p99_us=percentile(values, 99),
    )


@dataclass
class Window:
    """One measurement window: what completed between ``start_ns`` and ``end_ns``."""

    start_ns: int
    end_ns: int
    latencies_ns: list[int] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    send_ns: int = 0  # summed client-side preparation time of the completed requests
    recv_ns: int = 0  # summed client-side response decoding time
    client_cpu_s: float = 0.0  # CPU seconds the load generator used during the window
    #: streaming figures of the completed requests, in the order of ``latencies_ns``
    #: one StreamInfo (tritonkit.perf.stream_metrics) per completed streamed request
    streams: list[tuple[int, int, int, int, int, int, int, int, int, int]] = field(default_factory=list)
    loop_lag_ns: list[int] = field(default_factory=list)  # event-loop timer lateness samples
    cpu_wait_s: float | None = None  # load generator runnable but waiting for a CPU (None: unknown)

    @property
    def duration_s(self) -> float:
        return max(self.end_ns - self.start_ns, 1) / 1e9

    @property
    def completed(self) -> int:
        return len(self.latencies_ns)

    @property
    def throughput(self) -> float:
        """Successful inferences per second."""
        return self.completed / self.duration_s

    def avg_latency_us(self) -> float:
        if not self.latencies_ns:
            return 0.0
        return math.fsum(self.latencies_ns) / len(self.latencies_ns) / 1000.0

    def latency_us(self, stat: str) -> float:
        """avg or pNN latency of this window in microseconds (0 when nothing completed)."""
        if stat == "avg":
            return self.avg_latency_us()
        summary = summarize_ns(self.latencies_ns)
        return summary.get(stat) if summary else 0.0


def merge_windows(windows: Sequence[Window]) -> Window:
    """One window covering several consecutive ones (their requests and time added up)."""
    if not windows:
        raise ValueError("no windows to merge")
    merged = Window(start_ns=windows[0].start_ns, end_ns=windows[0].start_ns)
    total_ns = 0
    for w in windows:
        merged.latencies_ns.extend(w.latencies_ns)
        merged.streams.extend(w.streams)
        merged.errors.update(w.errors)
        merged.send_ns += w.send_ns
        merged.recv_ns += w.recv_ns
        merged.client_cpu_s += w.client_cpu_s
        merged.loop_lag_ns.extend(w.loop_lag_ns)
        if w.cpu_wait_s is not None:
            merged.cpu_wait_s = (merged.cpu_wait_s or 0.0) + w.cpu_wait_s
        total_ns += w.end_ns - w.start_ns
    merged.end_ns = merged.start_ns + total_ns
    return merged


@dataclass(frozen=True)
class StabilityVerdict:
    """Whether the last windows agree, and by how much they spread (fractions of their mean)."""

    stable: bool
    throughput_spread: float
    latency_spread: float
    reason: str


def _spread(values: Sequence[float]) -> float:
    """Largest relative distance of any value from the mean of all (0.1 == 10%)."""
    mean = math.fsum(values) / len(values)
    if mean <= 0:
        return 0.0 if all(v == 0 for v in values) else math.inf
    return max(abs(v - mean) for v in values) / mean


def check_stability(
    windows: Sequence[Window],
    *,
    percentage: float = 10.0,
    count: int = 3,
    latency_stat: str = "avg",
) -> StabilityVerdict:
    """perf_analyzer's rule: the last ``count`` windows agree within +-``percentage``%.

    Both throughput and latency (average by default, or a percentile such as p99) of each of
    the last windows must lie within the band around their mean. Windows where nothing
    completed never count as stable.
    """
    if len(windows) < count:
        return StabilityVerdict(False, math.inf, math.inf, f"only {len(windows)} of {count} windows")
    last = windows[-count:]
    if any(w.completed == 0 for w in last):
        return StabilityVerdict(False, math.inf, math.inf, "a window completed no request")
    limit = percentage / 100.0
    thr = _spread([w.throughput for w in last])
    lat = _spread([w.latency_us(latency_stat) for w in last])
    parts = []
    if thr > limit:
        parts.append(f"throughput varies {thr * 100:.1f}%")
    if lat > limit:
        parts.append(f"{latency_stat} latency varies {lat * 100:.1f}%")
    stable = not parts
    reason = "stable" if stable else ", ".join(parts) + f" (limit {percentage:g}%)"
    return StabilityVerdict(stable, thr, lat, reason)
