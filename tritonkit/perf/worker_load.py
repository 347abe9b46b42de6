"""What one load worker did in one step: its share, its clock, and whether it kept up.

A step measured from several workers reports one of these per worker beside the merged
figures, so a worker that fell behind (its CPU saturated, its request-rate sends late) is
named as a shortfall instead of being averaged into the step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tritonkit._records import JsonRecord

__all__ = ["CPU_SHARE", "LATE_SHARE", "WorkerLoad", "shortfall"]

#: a worker past this share of a core is saturated (the single-process check's figure)
CPU_SHARE = 0.8
#: a request-rate worker with more than this share of its sends late fell behind its schedule
LATE_SHARE = 0.01


@dataclass(frozen=True)
class WorkerLoad(JsonRecord):
    """One worker's step: its share of the load, what it completed, CPU, lateness, clock."""

    name: str
    share: float  # its concurrency slots or requests/s
    requests: int  # completed successfully during the step (warm-up included)
    errors: int
    cpu_share: float  # worker CPU seconds per wall second of the step
    delayed_requests: int  # request-rate sends that left late
    loop_lag_p50_us: float | None  # streamed steps: how late its event loop ran (p50)
    clock_offset_us: float  # worker clock - coordinator clock (monotonic)
    clock_error_us: float  # half the best ping round trip: the offset is right within this
    saturated: bool
    reason: str = ""


def shortfall(workers: Sequence[WorkerLoad]) -> str:
    """The workers that fell behind, in words ('' when every one kept up)."""
    return "; ".join(f"worker {w.name}: {w.reason}" for w in workers if w.saturated)
