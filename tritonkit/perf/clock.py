"""A worker's clock against the coordinator's, measured by ping/pong (NTP's rule, no NTP).

Workers stamp their records with their own ``time.monotonic_ns()``. On one Linux host every
process shares that clock; on another node (a pod) it counts from that node's boot, so the two
differ by an unknown offset. The coordinator sends pings, each worker answers with its clock,
and the sample with the shortest round trip bounds the offset best: the worker read its clock
somewhere inside that round trip, so taking its middle errs by at most half of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["ClockOffset", "PINGS", "estimate_offset"]

#: pings per worker at set-up (the shortest round trip of these is kept)
PINGS = 16


@dataclass(frozen=True)
class ClockOffset:
    """worker clock - coordinator clock, and how sure: half the best round trip."""

    offset_ns: int
    rtt_ns: int

    @property
    def error_ns(self) -> int:
        return self.rtt_ns // 2

    def to_worker(self, coordinator_ns: int) -> int:
        return coordinator_ns + self.offset_ns

    def to_coordinator(self, worker_ns: int) -> int:
        return worker_ns - self.offset_ns


def estimate_offset(samples: Sequence[tuple[int, int, int]]) -> ClockOffset:
    """The offset from ``(sent, worker_clock, received)`` samples (sent/received on the
    coordinator's clock): the one with the shortest round trip, its worker reading against the
    middle of that trip."""
    if not samples:
        raise ValueError("no ping samples")
    sent, worker, received = min(samples, key=lambda s: s[2] - s[0])
    return ClockOffset(offset_ns=worker - (sent + received) // 2, rtt_ns=received - sent)
