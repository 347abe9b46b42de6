"""Measurement windows: records sorted into consecutive windows by completion time, and the
server's statistics around them."""

from __future__ import annotations

from collections.abc import Sequence

from tritonkit.perf import server_stats
from tritonkit.perf._target import Record
from tritonkit.perf.loadgen import Load
from tritonkit.perf.results import ServerStats
from tritonkit.perf.saturation import LagProbe, cpu_wait_ns
from tritonkit.perf.stats import Window

__all__ = ["Windows", "server_delta"]


class Windows:
    """Sorts records into consecutive windows by completion time."""

    def __init__(self, load: Load, probe: LagProbe | None = None) -> None:
        self.load = load
        self.pending: list[Record] = []
        self.cpu = 0.0
        self.delayed = 0
        self.probe = probe  # the load's own event loop (in-process runs only)
        self.lags: list[int] = []
        self._wait_mark = cpu_wait_ns() if probe is not None else None
        self.cpu_wait = 0.0

    async def pull(self) -> None:
        records, cpu, delayed = await self.load.drain()
        self.pending.extend(records)
        self.cpu += cpu
        self.delayed += delayed
        if self.probe is not None:
            self.lags.extend(self.probe.take())
        if self._wait_mark is not None:
            now = cpu_wait_ns()
            if now is not None:
                self.cpu_wait += (now - self._wait_mark) / 1e9
                self._wait_mark = now

    def reset(self) -> None:
        """Forget what the warm-up produced."""
        self.pending.clear()
        self.delayed = 0
        self.cpu = 0.0
        self.lags = []
        self.cpu_wait = 0.0

    def cut(self, start_ns: int, end_ns: int) -> Window:
        """A window of everything completed in [start_ns, end_ns); later records stay pending."""
        window = Window(
            start_ns=start_ns,
            end_ns=end_ns,
            client_cpu_s=self.cpu,
            loop_lag_ns=self.lags,
            cpu_wait_s=self.cpu_wait if self._wait_mark is not None else None,
        )
        self.lags = []
        self.cpu_wait = 0.0
        keep: list[Record] = []
        for rec in self.pending:
            end, latency, kind, stream = rec
            if end >= end_ns:
                keep.append(rec)
            elif end >= start_ns:
                if kind is None:
                    window.latencies_ns.append(latency)
                    if stream is not None:
                        window.streams.append(stream)
                else:
                    window.errors[kind] += 1
        self.pending = keep
        self.cpu = 0.0
        return window


def server_delta(
    snaps: Sequence[server_stats.StatsSnapshot | None], first: int, last: int
) -> ServerStats | None:
    before, after = snaps[first], snaps[last]
    if before is None or after is None:
        return None
    return server_stats.delta(before, after)
