"""Is the client, not the server, in a streamed figure? Measured, step by step.

Three measurements, all of the load generator itself:

- **client delay** (kernel-stamped streams, plain HTTP): how long after a response arrived
  (the kernel's receive stamp) the client got round to it. The figures use the arrival, so this
  delay is not in them; it says how busy the client was. A reader that falls behind by more
  than the gap between two responses gets them merged by the kernel into one packet stamped
  with the newest arrival: such shared stamps are counted, and when they hit first responses
  the step says TTFT may read high by up to one gap.
- **event-loop lag** (every in-process run): how late a 2 ms timer fires on the load's event
  loop. A response stamped when Python reads it (gRPC, HTTPS) is late by about this much, so
  TTFT and request latency read high by about its median.
- **CPU wait**: the share of the step the load generator's threads spent runnable but waiting
  for a CPU (``/proc/self/task/*/schedstat``, Linux): other processes on the client machine
  taking its cores.

A step is **client-bound** when the load generator used most of a core (its sends lag), or
when its figures are stamped on read and the event-loop lag is more than
``BIAS_SHARE`` of the TTFT p50: the run then says by how much, instead of printing the figure
as the server's.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tritonkit._records import JsonRecord, to_record
from tritonkit.perf.stats import LatencySummary, summarize_ns

#: a read-stamped figure whose estimated client bias exceeds this share of it is not the server's
BIAS_SHARE = 0.05
#: the load generator is called the bottleneck past this share of a core (CPU time / wall time)
CPU_SHARE = 0.8
_PROBE_S = 0.002
#: read-stamped figures are not trusted when the client's threads waited this share of a step
#: for a CPU (measured: 1.4 of a thread-second per second at load 7 on 2 cores read gRPC TTFT
#: 51% high while the event-loop lag was 0.7 ms)
READ_WAIT_SHARE = 0.25
#: a concurrency step is short of its load when the requests in flight average this much less
HELD_SHORT = 0.10


def cpu_wait_ns() -> int | None:
    """Nanoseconds this process's threads have waited on a run queue (None off Linux)."""
    total = 0
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    for tid in tasks:
        with contextlib.suppress(OSError, ValueError, IndexError):
            with open(f"/proc/self/task/{tid}/schedstat", encoding="ascii") as fh:
                total += int(fh.read().split()[1])
    return total


class LagProbe:
    """Measures how late a short timer fires on the running event loop."""

    def __init__(self) -> None:
        self._lags: list[int] = []
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            due = time.monotonic_ns() + int(_PROBE_S * 1e9)
            await asyncio.sleep(_PROBE_S)
            self._lags.append(max(time.monotonic_ns() - due, 0))

    def take(self) -> list[int]:
        lags, self._lags = self._lags, []
        return lags

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None


@dataclass(frozen=True)
class ClientCheck(JsonRecord):
    """How much of a streamed step's figures may be the client's own delay."""

    stamping: str  # "kernel": response times are kernel arrivals; "read": when Python read them
    client_delay: LatencySummary | None  # kernel-stamped: arrival -> the client saw it (us)
    loop_lag: LatencySummary | None  # event-loop timer lateness (us); None with worker processes
    cpu_wait_share: float | None  # share of the step the client waited for a CPU (None: unknown)
    cpu_share: float  # load-generator CPU per wall second per process
    held_concurrency: float | None  # requests in flight on average (concurrency steps)
    shared_share: float  # kernel stamps shared by merged packets (share of responses)
    bias_us: float  # estimated amount TTFT / request latency read high because of the client
    bound: bool
    reason: str

    _record_keys = {
        "client_delay": "client_delay_us",
        "loop_lag": "loop_lag_us",
        "shared_share": "shared_stamp_share",
    }
    _record_defaults = {"cpu_share": 0.0, "shared_share": 0.0, "bias_us": 0.0, "bound": False, "reason": ""}

    def to_dict(self) -> dict[str, Any]:
        # shared_stamp_share is written after cpu_share (where files have always had it)
        return to_record(
            self,
            keys=self._record_keys,
            skip=("shared_share",),
            after={"cpu_share": {"shared_stamp_share": self.shared_share}},
        )


def check_client(
    *,
    delays_ns: Sequence[int],
    shared_share: float = 0.0,
    first_shared_share: float = 0.0,
    itl_p50_us: float | None = None,
    asked_concurrency: float | None = None,
    busy_ns: int = 0,
    lags_ns: Sequence[int],
    cpu_wait_s: float | None,
    cpu_share: float,
    duration_s: float,
    ttft_p50_us: float | None,
) -> ClientCheck:
    """The verdict for one step (``delays_ns``: per-request client delays of kernel-stamped
    requests; none means the responses were stamped when read)."""
    stamping = "kernel" if delays_ns else "read"
    delay = summarize_ns(delays_ns)
    lag = summarize_ns(lags_ns)
    wait_share = cpu_wait_s / max(duration_s, 1e-9) if cpu_wait_s is not None else None
    bias = 0.0 if stamping == "kernel" else (lag.p50_us if lag else 0.0)
    reasons = []
    if cpu_share >= CPU_SHARE:
        reasons.append(
            f"the load generator used {cpu_share * 100:.0f}% of a core: its sends lag the load asked"
        )
    held = busy_ns / 1e9 / max(duration_s, 1e-9) if asked_concurrency else None
    if held is not None and asked_concurrency and held < (1 - HELD_SHORT) * asked_concurrency:
        reasons.append(
            f"the client kept only {held:.1f} of {asked_concurrency:g} requests in flight on average "
            "(it sent late): the server saw a lighter load than asked"
        )
    if stamping == "read" and wait_share is not None and wait_share > READ_WAIT_SHARE:
        reasons.append(
            f"responses are stamped when read and the client waited for a CPU {wait_share * 100:.0f}% of "
            "the step (other processes): TTFT, ITL and latency may read high by an amount it cannot measure"
        )
    if stamping == "read" and ttft_p50_us and bias > BIAS_SHARE * ttft_p50_us:
        reasons.append(
            f"responses are stamped when read and the client's event loop ran {bias / 1000:.2f} ms late "
            f"(p50): TTFT p50 may read ~{bias / 1000:.2f} ms ({bias / ttft_p50_us * 100:.0f}%) high"
        )
    if stamping == "kernel" and first_shared_share > BIAS_SHARE:
        gap = f"{itl_p50_us / 1000:.2f} ms" if itl_p50_us else "one gap between responses"
        reasons.append(
            f"the client fell behind by more than a gap between responses on {first_shared_share * 100:.0f}% "
            f"of requests ({shared_share * 100:.0f}% of responses): the kernel merged their packets and "
            f"stamps them all with the newest, so TTFT p50 may read high by up to ~{gap} (ITL p50)"
        )
    if reasons and wait_share is not None and wait_share > 0.05 and not any("waited" in r for r in reasons):
        reasons.append(f"the client waited for a CPU {wait_share * 100:.0f}% of the step (other processes)")
    if reasons and stamping == "read":
        reasons.append("measure over plain HTTP (kernel receive stamps) or from a quieter client")
    return ClientCheck(
        stamping=stamping,
        client_delay=delay,
        loop_lag=lag,
        cpu_wait_share=wait_share,
        cpu_share=cpu_share,
        shared_share=shared_share,
        held_concurrency=held,
        bias_us=bias,
        bound=bool(reasons),
        reason="; ".join(reasons),
    )
