"""The coordinator: N load workers over TCP, driven as one :class:`~tritonkit.perf.loadgen.Load`.

The runner measures windows and applies the stability rule exactly as for one process; this
load only has to deliver every raw record on one clock. So the coordinator:

- accepts N workers (local processes for ``--workers N``, pods for ``--kube N``), measures each
  one's clock offset by ping/pong (:mod:`tritonkit.perf.clock`, no NTP assumed) and sends it the
  call target and the request data set;
- splits each step's load (concurrency slots, or the request rate) across them and starts all
  at one instant of its own clock, given to each worker on that worker's clock;
- on every drain, collects each worker's raw records and moves their completion times onto its
  own clock, so the runner cuts one set of windows from the union of all records: every
  percentile is computed over the union, never averaged from per-worker figures;
- fails the step, naming the worker, when one goes away; reports per worker its share, CPU,
  late sends and clock offset, and names one that fell behind as a shortfall.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from tritonkit._timeouts import within
from tritonkit.errors import PerfError
from tritonkit.perf import wire
from tritonkit.perf._target import Record, Target
from tritonkit.perf.clock import PINGS, ClockOffset, estimate_offset
from tritonkit.perf.inputs import Array
from tritonkit.perf.local_workers import LocalWorkers
from tritonkit.perf.stats import summarize_ns
from tritonkit.perf.worker_load import CPU_SHARE, LATE_SHARE, WorkerLoad

__all__ = ["ACCEPT_S", "KUBE_ACCEPT_S", "TcpLoad", "WorkerLink", "open_workers", "phase_ns", "split_load"]

_log = logging.getLogger(__name__)

#: how long the coordinator waits for its local worker processes to connect
ACCEPT_S = 60.0
#: ... and for worker pods (scheduling, image pull, a node scaled up)
KUBE_ACCEPT_S = 900.0
#: a worker's answer to a drain, ping or set-up must come within this
REPLY_S = 30.0
#: a step starts this long after the start command leaves, plus the slowest worker's round trip
START_LEAD_S = 0.2
_CLOSED = {"op": "__closed__"}


def split_load(total: float, parts: int, index: int, *, integral: bool) -> float:
    """Worker ``index``'s share of ``total``: concurrency slots as evenly as integers go (the
    first ones take one more), a request rate in equal parts."""
    if integral:
        base, extra = divmod(int(total), parts)
        return float(base + (1 if index < extra else 0))
    return total / parts


def phase_ns(mode: str, level: float, index: int) -> int:
    """How long after the common start worker ``index`` begins: at a request rate, each worker's
    sends fall between the others' (worker i at i / rate), so N workers at rate/N each send one
    evenly spaced stream, as one process does, and not N requests at once every N / rate."""
    if mode != "request_rate" or level <= 0:
        return 0
    return int(index * 1e9 / level)


class WorkerLink:
    """One connected worker: its stream, its clock, what it sent since the last drain."""

    def __init__(self, *, name: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.name = name
        self.reader, self.writer = reader, writer
        self.clock = ClockOffset(0, 0)
        self.replies: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.gone = ""  # why the connection ended ('' while it lives)
        self.share = 0.0
        self._task: asyncio.Task[None] | None = None
        self.reset_step()

    def reset_step(self) -> None:
        self.requests = self.errors = self.delayed = 0
        self.cpu_s = 0.0
        self.lags: list[int] = []
        self.started_ns = time.monotonic_ns()

    def listen(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        try:
            while True:
                msg = await wire.read_frame(self.reader, timeout_s=1e9, waiting_for=f"worker {self.name}")
                self.replies.put_nowait(msg)
        except wire.WireClosedError as exc:
            self.gone = str(exc).replace(f"while waiting for worker {self.name}", "").strip()
            self.replies.put_nowait(_CLOSED)

    def send(self, message: Mapping[str, Any]) -> None:
        """Queue one command (the stream writes it in order; replies are awaited separately)."""
        if self.gone:
            raise self.lost("before it was sent a command")
        self.writer.write(wire.frame(message))

    async def reply(self, op: str, *, timeout_s: float = REPLY_S) -> dict[str, Any]:
        """The worker's next answer, which must be ``op``."""
        try:
            msg = await within(self.replies.get(), timeout_s)
        except asyncio.TimeoutError:
            raise PerfError(
                f"load worker {self.name} did not answer '{op}' within {timeout_s:.0f}s",
                hint="the worker's machine may be overloaded or its network cut; see its log",
            ) from None
        if msg is _CLOSED:
            raise self.lost(f"while the coordinator waited for '{op}'")
        if msg["op"] == "failed":
            raise PerfError(f"load worker {self.name} could not start: {msg.get('error', '')}")
        if msg["op"] != op:
            raise PerfError(f"load worker {self.name} answered '{msg['op']}' where '{op}' was due")
        return msg

    def lost(self, when: str) -> PerfError:
        return PerfError(
            f"load worker {self.name} went away {when} ({self.gone or 'connection closed'}); its share "
            f"was {self.share:g}: the step is not reported, since the rest of the load alone would be "
            "read as the whole",
            hint="see the worker's log (kube: kubectl logs of its pod), then rerun",
        )

    async def measure_clock(self) -> None:
        samples = []
        for _ in range(PINGS):
            sent = time.monotonic_ns()
            self.send({"op": "ping"})
            pong = await self.reply("pong")
            samples.append((sent, int(pong["t"]), time.monotonic_ns()))
        self.clock = estimate_offset(samples)

    def take_records(self, msg: Mapping[str, Any]) -> list[Record]:
        records = wire.records_from_wire(msg["records"], self.clock.offset_ns)
        failed = sum(1 for r in records if r[2] is not None)
        self.requests += len(records) - failed
        self.errors += failed
        self.cpu_s += float(msg["cpu_s"])
        self.delayed += int(msg["delayed"])
        self.lags.extend(int(v) for v in msg["lags_ns"])
        return records

    def step_load(self, mode: str) -> WorkerLoad:
        wall_s = max(time.monotonic_ns() - self.started_ns, 1) / 1e9
        cpu_share = self.cpu_s / wall_s
        lag = summarize_ns(self.lags)
        reasons = []
        if cpu_share >= CPU_SHARE:
            reasons.append(f"used {cpu_share * 100:.0f}% of a core: its sends lag its share")
        sends = self.requests + self.errors
        if mode == "request_rate" and sends and self.delayed > LATE_SHARE * sends:
            reasons.append(f"{self.delayed} of {sends} sends left late: it fell behind its {self.share:g}/s")
        return WorkerLoad(
            name=self.name,
            share=self.share,
            requests=self.requests,
            errors=self.errors,
            cpu_share=cpu_share,
            delayed_requests=self.delayed,
            loop_lag_p50_us=lag.p50_us if lag else None,
            clock_offset_us=self.clock.offset_ns / 1000.0,
            clock_error_us=self.clock.error_ns / 1000.0,
            saturated=bool(reasons),
            reason="; ".join(reasons),
        )

    async def close(self) -> None:
        with contextlib.suppress(PerfError, OSError, ConnectionError):
            self.send({"op": "exit"})
            await self.writer.drain()
        if self._task is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await within(asyncio.shield(self._task), 15.0)
            self._task.cancel()
        self.writer.close()


class TcpLoad:
    """Load from ``workers`` workers over TCP; a :class:`~tritonkit.perf.loadgen.Load`.

    ``listen``: where to accept them (local: 127.0.0.1 on a free port; in a pod: 0.0.0.0 on the
    Service's port); ``spawn``: start them here as processes (``--workers N``) or wait for
    workers started elsewhere (``--kube N``'s pods).
    """

    def __init__(
        self,
        *,
        target: Target,
        requests: Sequence[Mapping[str, Array]],
        workers: int,
        conn_limit: int,
        listen: tuple[str, int] = ("127.0.0.1", 0),
        spawn: bool = True,
        accept_s: float = ACCEPT_S,
    ) -> None:
        if workers < 1:
            raise PerfError("a TCP load needs at least one worker")
        self.target = target
        self.workers = workers
        self.listen = listen
        self.spawn = spawn
        self.accept_s = accept_s
        self._requests = list(requests)
        self._conn_limit = conn_limit
        self.links: list[WorkerLink] = []
        self.local: LocalWorkers | None = None
        self._server: asyncio.base_events.Server | None = None
        self._pending: list[Record] = []
        self._mode = "concurrency"
        self._active: list[WorkerLink] = []
        self._cpu_mark = time.process_time()
        self._arrived = asyncio.Event()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            hello = await wire.read_frame(reader, timeout_s=REPLY_S, waiting_for="a worker's hello")
        except PerfError:
            writer.close()
            return
        if hello["op"] != "hello" or len(self.links) >= self.workers:
            writer.close()  # not a worker, or one too many: the step's split is already fixed
            return
        link = WorkerLink(name=str(hello.get("name") or f"#{len(self.links)}"), reader=reader, writer=writer)
        link.listen()
        self.links.append(link)
        if len(self.links) == self.workers:
            self._arrived.set()

    async def open(self) -> None:
        self._server = await asyncio.start_server(self._accept, self.listen[0], self.listen[1])
        host, port = self._server.sockets[0].getsockname()[:2]
        if self.spawn:
            self.local = LocalWorkers(count=self.workers, host=host, port=port)
        try:
            await self._wait_for_workers(f"{host}:{port}")
            self._server.close()  # no more workers: the split is fixed
            for link in self.links:
                await link.measure_clock()
            payload = {
                "op": "setup",
                "target": wire.encode_target(self.target),
                "requests": wire.encode_requests(self._requests),
                "conn_limit": self._conn_limit,
            }
            for link in self.links:
                link.send(payload)
            for link in self.links:
                await link.reply("ready", timeout_s=max(REPLY_S, 120.0))
        except BaseException:
            await self.close()
            raise
        for link in self.links:
            _log.info(
                "load worker %s: clock offset %.1f us (+-%.1f us)",
                link.name,
                link.clock.offset_ns / 1e3,
                link.clock.error_ns / 1e3,
            )

    async def _wait_for_workers(self, address: str) -> None:
        deadline = time.monotonic() + self.accept_s
        while not self._arrived.is_set():
            if self.local is not None and (why := self.local.exited()):
                raise PerfError(f"a load worker could not start: {why}")
            if time.monotonic() > deadline:
                raise PerfError(
                    f"only {len(self.links)} of {self.workers} load workers connected to {address} "
                    f"within {self.accept_s:.0f}s",
                    hint="local: see that python -m tritonkit.perf.worker runs here; kube: see the "
                    "worker pods' events and logs (image pull, scheduling, network policy)",
                )
            with contextlib.suppress(asyncio.TimeoutError):
                await within(self._arrived.wait(), 0.2)

    def set_headers(self, headers: Mapping[str, str]) -> None:
        for link in self.links:
            link.send({"op": "headers", "headers": dict(headers)})

    async def start_step(self, mode: str, level: float, *, poisson: bool, stagger: bool = False) -> None:
        self._mode = mode
        self._pending = []
        self._active = []
        slowest = max(link.clock.rtt_ns for link in self.links)
        at_ns = time.monotonic_ns() + int(START_LEAD_S * 1e9) + slowest
        for i, link in enumerate(self.links):
            link.share = split_load(level, self.workers, i, integral=mode == "concurrency")
            link.reset_step()
            link.started_ns = at_ns
            if link.share > 0:
                self._active.append(link)
                link.send(
                    {
                        "op": "start",
                        "mode": mode,
                        "level": link.share,
                        "poisson": poisson,
                        "stagger": stagger,
                        "at_ns": link.clock.to_worker(at_ns + phase_ns(mode, level, i)),
                    }
                )
        for link in self._active:
            await link.writer.drain()
        wait = (at_ns - time.monotonic_ns()) / 1e9
        if wait > 0:
            await asyncio.sleep(wait)  # the runner's warm-up starts when the workers do

    async def stop_step(self) -> None:
        if any(link.gone for link in self._active):
            return  # the step already failed on the lost worker; close() ends the others
        for link in self._active:
            link.send({"op": "stop"})
        for link in self._active:
            await link.reply("stopped", timeout_s=self.target.timeout_s + 10)
        self._pending = []

    def step_loads(self) -> tuple[WorkerLoad, ...]:
        """Every worker's share and figures for the step just run (call before the next starts)."""
        return tuple(link.step_load(self._mode) for link in self.links)

    async def drain(self) -> tuple[list[Record], float, int]:
        for link in self.links:
            link.send({"op": "drain"})
        delayed = 0
        cpu = 0.0
        for link in self.links:
            msg = await link.reply("records")
            self._pending.extend(link.take_records(msg))
            cpu += float(msg["cpu_s"])
            delayed += int(msg["delayed"])
        records, self._pending = self._pending, []
        now = time.process_time()
        cpu += now - self._cpu_mark  # the coordinator's own share, as one process's run counts it
        self._cpu_mark = now
        return records, cpu, delayed

    async def close(self) -> None:
        for link in self.links:
            await link.close()
        self.links = []
        if self._server is not None:
            self._server.close()
            self._server = None
        if self.local is not None:
            self.local.close()
            self.local = None


async def open_workers(
    target: Target,
    requests: Sequence[Mapping[str, Array]],
    *,
    workers: int,
    conn_limit: int,
    listen: tuple[str, int] | None,
) -> TcpLoad:
    """``workers`` started here as processes over loopback TCP (``listen`` None: ``--workers N``),
    or accepted on ``listen`` from elsewhere (a ``--kube`` run's pods); connected and set up."""
    load = TcpLoad(
        target=target,
        requests=requests,
        workers=workers,
        conn_limit=conn_limit,
        listen=listen or ("127.0.0.1", 0),
        spawn=listen is None,
        accept_s=ACCEPT_S if listen is None else KUBE_ACCEPT_S,
    )
    await load.open()
    return load
