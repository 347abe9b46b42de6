"""Triton's statistics API: cumulative counters per model, turned into per-step deltas.

Triton keeps running totals (counts and nanoseconds) per model version; the difference
between two snapshots is what the server did during the window between them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tritonkit.perf.results import ServerStats

if TYPE_CHECKING:
    from tritonkit.client.control import AsyncModelControl

_PHASES = ("success", "queue", "compute_input", "compute_infer", "compute_output")


@dataclass(frozen=True)
class StatsSnapshot:
    """Cumulative counters of one model (all versions added up)."""

    inference_count: int = 0
    execution_count: int = 0
    counts: tuple[int, ...] = (0, 0, 0, 0, 0)  # per phase in _PHASES order
    ns: tuple[int, ...] = (0, 0, 0, 0, 0)


def _int(value: Any) -> int:
    # gRPC's JSON form writes uint64 counters as strings
    return int(value or 0)


def parse_statistics(data: Mapping[str, Any], model: str) -> StatsSnapshot | None:
    """A snapshot for ``model`` from ``get_inference_statistics(..., as_json)``; None if absent."""
    entries = [m for m in data.get("model_stats", []) if m.get("name") == model]
    if not entries:
        return None
    inf = exe = 0
    counts = [0] * len(_PHASES)
    ns = [0] * len(_PHASES)
    for entry in entries:
        inf += _int(entry.get("inference_count"))
        exe += _int(entry.get("execution_count"))
        stats = entry.get("inference_stats", {})
        for i, phase in enumerate(_PHASES):
            block = stats.get(phase, {})
            counts[i] += _int(block.get("count"))
            ns[i] += _int(block.get("ns"))
    return StatsSnapshot(inference_count=inf, execution_count=exe, counts=tuple(counts), ns=tuple(ns))


def delta(before: StatsSnapshot, after: StatsSnapshot) -> ServerStats | None:
    """What happened between two snapshots, per successful request; None if nothing did."""
    counts = [a - b for a, b in zip(after.counts, before.counts, strict=True)]
    ns = [a - b for a, b in zip(after.ns, before.ns, strict=True)]
    success = counts[0]
    if success <= 0:
        return None

    def per_request(i: int) -> float:
        # Triton counts every phase once per request, so dividing by the success count
        # gives the average time a request spent in that phase.
        return ns[i] / success / 1000.0

    return ServerStats(
        success_count=success,
        inference_count=after.inference_count - before.inference_count,
        execution_count=after.execution_count - before.execution_count,
        request_us=per_request(0),
        queue_us=per_request(1),
        compute_input_us=per_request(2),
        compute_infer_us=per_request(3),
        compute_output_us=per_request(4),
    )


async def read_snapshot(control: AsyncModelControl | None, model: str, version: str) -> StatsSnapshot | None:
    """``model``'s counters now; None without a control client or when the server gives none
    (statistics are optional: a gateway may block them, and the step goes on)."""
    if control is None:
        return None
    try:
        data = await control.statistics(model, version)
    except Exception:  # noqa: BLE001 - whatever the call raised, the step goes on without them
        return None
    return parse_statistics(data, model)
