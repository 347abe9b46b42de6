"""The closed loop's start: lock-step (every slot at once) or staggered over one request's time.

No server here: stand-in senders drive :class:`LocalLoad`; the real senders are exercised
against tritonserver by the perf and tune integration tests.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from tritonkit.perf._target import Record, Target
from tritonkit.perf.loadgen import LocalLoad

MS = 1_000_000


def _target() -> Target:
    return Target(client_url="x", ssl=False, protocol="http", model="m", model_version="", outputs=())


class _Slow:
    """Every request takes ``latency_s``; records when each one was sent."""

    def __init__(self, latency_s: float) -> None:
        self.target = _target()
        self.headers: Any = {}
        self.latency_s = latency_s
        self.sent_ns: list[int] = []

    async def open(self) -> None: ...
    async def close(self) -> None: ...

    async def send(self) -> Record:
        start = time.monotonic_ns()
        self.sent_ns.append(start)
        await asyncio.sleep(self.latency_s)
        end = time.monotonic_ns()
        return (end, end - start, None, None)


async def _first_sends(stagger: bool, slots: int = 8, latency_s: float = 0.08) -> list[int]:
    sender = _Slow(latency_s)
    load = LocalLoad(sender)
    await load.start_step("concurrency", float(slots), poisson=False, stagger=stagger)
    while len(sender.sent_ns) < slots + 1:  # every slot's first request, and slot 0's second
        await asyncio.sleep(0.005)
    await load.stop_step()
    return sender.sent_ns


async def test_lock_step_sends_every_slot_at_once() -> None:
    sent = await _first_sends(stagger=False)
    assert max(sent[:8]) - min(sent[:8]) < 40 * MS  # all within half a request's time


async def test_staggered_slots_start_spread_over_the_first_requests_latency() -> None:
    sent = await _first_sends(stagger=True)
    first, rest = sent[0], sorted(sent[1:9])
    # the other slots wait for the first answer (80 ms), then start 80/8 ms apart
    assert rest[0] - first >= 75 * MS
    assert rest[-1] - rest[0] >= 0.6 * 80 * MS * 6 / 8
    gaps = [b - a for a, b in zip(rest, rest[1:], strict=False)]
    assert min(gaps) >= 5 * MS


async def test_a_staggered_step_stopped_before_the_first_answer_ends_at_once() -> None:
    sender = _Slow(0.2)
    load = LocalLoad(sender)
    await load.start_step("concurrency", 16.0, poisson=False, stagger=True)
    await asyncio.sleep(0.01)
    began = time.monotonic()
    await load.stop_step()  # slot 0's request finishes; the 15 waiting slots must not hang
    assert time.monotonic() - began < 1.0
    assert len(sender.sent_ns) == 1


class _OneInstanceBatcher:
    """Triton's dynamic batcher in miniature: one instance, batches of at most ``max_batch``,
    a batch waits at most ``delay_s`` after its first request, runs ``exec_s``."""

    def __init__(self, *, max_batch: int, delay_s: float, exec_s: float) -> None:
        self.target = _target()
        self.headers: Any = {}
        self.max_batch, self.delay_s, self.exec_s = max_batch, delay_s, exec_s
        self.queue: list[tuple[float, asyncio.Future[None]]] = []
        self.wake = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def open(self) -> None: ...

    async def close(self) -> None:
        if self.task is not None:
            self.task.cancel()

    async def _instance(self) -> None:
        while True:
            while not self.queue:
                self.wake.clear()
                await self.wake.wait()
            oldest = self.queue[0][0]
            while len(self.queue) < self.max_batch:
                left = oldest + self.delay_s - time.monotonic()
                if left <= 0:
                    break
                self.wake.clear()
                try:
                    await asyncio.wait_for(self.wake.wait(), left)
                except asyncio.TimeoutError:
                    break
            batch, self.queue = self.queue[: self.max_batch], self.queue[self.max_batch :]
            await asyncio.sleep(self.exec_s)
            for _, done in batch:
                done.set_result(None)

    async def send(self) -> Record:
        if self.task is None:
            self.task = asyncio.get_running_loop().create_task(self._instance())
        start = time.monotonic_ns()
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.queue.append((time.monotonic(), done))
        self.wake.set()
        await done
        end = time.monotonic_ns()
        return (end, end - start, None, None)


async def _throughput(stagger: bool) -> float:
    server = _OneInstanceBatcher(max_batch=8, delay_s=0.03, exec_s=0.06)
    load = LocalLoad(server)
    await load.start_step("concurrency", 8.0, poisson=False, stagger=stagger)
    await asyncio.sleep(0.5)  # past the start
    await load.drain()
    await asyncio.sleep(1.0)
    records, _, _ = await load.drain()
    await load.stop_step()
    await server.close()
    return len(records) / 1.0


async def test_a_config_that_needs_lock_step_arrivals_shows_its_fall_when_the_start_is_staggered() -> None:
    # one instance, batch 8, 30 ms queue delay, 60 ms per batch, 8 slots: in lock-step every
    # batch is full (8 per 60 ms); started spread over one request's time, the slots split into
    # two groups that take turns on the instance for good (about 8 per 120 ms), as with
    # perf_analyzer's one thread per slot over HTTP
    lock_step = await _throughput(stagger=False)
    staggered = await _throughput(stagger=True)
    assert lock_step > 100
    assert staggered < 0.75 * lock_step
