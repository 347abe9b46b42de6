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
        self.ended_ns: list[int] = []

    async def open(self) -> None: ...
    async def close(self) -> None: ...

    async def send(self) -> Record:
        start = time.monotonic_ns()
        self.sent_ns.append(start)
        await asyncio.sleep(self.latency_s)
        end = time.monotonic_ns()
        self.ended_ns.append(end)
        return (end, end - start, None, None)


async def _first_sends(stagger: bool, slots: int = 8, latency_s: float = 0.08) -> _Slow:
    sender = _Slow(latency_s)
    load = LocalLoad(sender)
    await load.start_step("concurrency", float(slots), poisson=False, stagger=stagger)
    while len(sender.sent_ns) < slots + 1:  # every slot's first request, and slot 0's second
        await asyncio.sleep(0.005)
    await load.stop_step()
    return sender


# The start is asserted by order (which sends came before the first answer), not by how many
# milliseconds apart they were: a loaded box wakes the loop late, it does not reorder it.


async def test_lock_step_sends_every_slot_at_once() -> None:
    sender = await _first_sends(stagger=False)
    first_answer = min(sender.ended_ns)
    assert sum(sent < first_answer for sent in sender.sent_ns) == 8  # every slot before any answer


async def test_staggered_slots_start_spread_over_the_first_requests_latency() -> None:
    sender = await _first_sends(stagger=True)
    sent, first_answer = sender.sent_ns, min(sender.ended_ns)
    # the other slots wait for the first answer, then start one after another
    assert sum(s < first_answer for s in sent) == 1
    rest = sent[1:9]
    assert len(set(rest)) == 8 and all(s >= first_answer for s in rest)


async def test_a_staggered_step_stopped_before_the_first_answer_ends_at_once() -> None:
    sender = _Slow(0.2)
    load = LocalLoad(sender)
    await load.start_step("concurrency", 16.0, poisson=False, stagger=True)
    await asyncio.sleep(0.01)
    # slot 0's request finishes; the 15 waiting slots must not hang (the deadline only ends a
    # test that hangs: a stop that waited for them would never end)
    await asyncio.wait_for(load.stop_step(), 60)
    assert len(sender.sent_ns) == 1


class _OneInstanceBatcher:
    """Triton's dynamic batcher in miniature: one instance, batches of at most ``max_batch``,
    a batch waits at most ``delay_s`` after its first request, runs ``exec_s``."""

    def __init__(self, *, max_batch: int, delay_s: float, exec_s: float) -> None:
        self.target = _target()
        self.headers: Any = {}
        self.max_batch, self.delay_s, self.exec_s = max_batch, delay_s, exec_s
        self.queue: list[tuple[float, asyncio.Future[None]]] = []
        self.batches: list[int] = []
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
            self.batches.append(len(batch))
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


async def _batches(stagger: bool) -> list[int]:
    """The sizes of the batches the instance ran once past the start."""
    server = _OneInstanceBatcher(max_batch=8, delay_s=0.03, exec_s=0.06)
    load = LocalLoad(server)
    await load.start_step("concurrency", 8.0, poisson=False, stagger=stagger)
    await asyncio.sleep(0.5)  # past the start
    await load.drain()
    past_start = len(server.batches)
    await asyncio.sleep(1.0)
    await load.drain()
    await load.stop_step()
    await server.close()
    return server.batches[past_start:]


async def test_a_config_that_needs_lock_step_arrivals_shows_its_fall_when_the_start_is_staggered() -> None:
    # one instance, batch 8, 30 ms queue delay, 60 ms per batch, 8 slots: in lock-step every
    # batch is full (8 per 60 ms); started spread over one request's time, the slots split into
    # two groups that take turns on the instance for good (about 8 per 120 ms), as with
    # perf_analyzer's one thread per slot over HTTP
    # (asserted on the batches the instance ran, which a loaded box leaves alone, not on
    # requests per second, which it does not; benchmarks/dynamic_batching.py has the rates)
    lock_step = await _batches(stagger=False)
    staggered = await _batches(stagger=True)
    assert lock_step and set(lock_step) == {8}
    assert staggered and sum(staggered) / len(staggered) < 0.75 * 8
