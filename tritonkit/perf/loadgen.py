"""The load generator: asyncio on tritonclient's aio clients, in this process or in a worker.

Every completed request becomes a :data:`Record` ``(end_ns, latency_ns, error_kind, stream)``
(``stream``: the :data:`~tritonkit.perf.stream_metrics.StreamInfo` of a streamed request, else None) stamped
with ``time.monotonic_ns()``. Several processes or pods each run a :class:`LocalLoad` as a
worker (:mod:`tritonkit.perf.worker`); the coordinator (:mod:`tritonkit.perf.coordinator`) moves
their records onto its own clock, so they fall into the same measurement windows as local ones.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol
from urllib.parse import quote

from tritonkit.client.connection import close_channels, grpc_channels, tls_context
from tritonkit.perf._composed_sender import ComposedSender
from tritonkit.perf._http import HttpPool, request_head
from tritonkit.perf._openai_sender import OpenAiSender
from tritonkit.perf._stream_sender import StreamSender
from tritonkit.perf._target import Record, SenderBase, Target, error_kind, grpc_infer_request
from tritonkit.perf.inputs import Array

#: most requests in flight in request-rate mode before sends count as delayed
MAX_IN_FLIGHT = 4096
#: a request-rate send that starts later than this behind schedule counts as delayed
LATE_NS = 1_000_000
#: a staggered closed loop spreads its slots' first requests over the first request's latency,
#: but over no more than this (an LLM's seconds-long request would hold the ramp that long)
MAX_STAGGER_S = 1.0


class Sender(SenderBase):
    """One connection pool plus pre-encoded requests; ``send()`` times one inference.

    Each request of the data set is encoded once, up front, with tritonclient's own encoders
    (HTTP: ``InferenceServerClient.generate_request_body``; gRPC: ``service_pb2`` messages):
    the data never changes, and re-encoding hundreds of kB per request would make the client,
    not the server, the thing measured. perf_analyzer prepares its requests once too.
    HTTP goes over :mod:`tritonkit.perf._http` keep-alive connections (aiohttp cost 2-3x the
    client CPU per request, see there); gRPC over a grpc.aio channel that sends the
    pre-serialized ``ModelInfer`` bytes.
    """

    def __init__(self, *, target: Target, requests: Sequence[Mapping[str, Array]], conn_limit: int) -> None:
        super().__init__(target=target, requests=requests, conn_limit=conn_limit)
        self._pool: HttpPool | None = None  # HTTP
        self._heads: list[bytes] = []  # HTTP request line + headers, one per payload
        self._channels: list[Any] = []  # grpc.aio channels (gRPC)
        self._grpc_calls: list[Any] = []
        self._turn = 0
        self._payloads: list[tuple[bytes, int | None]] = []
        self._uri = ""

    def _headers_changed(self) -> None:
        self._build_heads()

    def _open_http(self) -> None:
        import tritonclient.http as http
        import tritonclient.http.aio as http_aio
        from tritonclient.utils import np_to_triton_dtype

        t = self.target
        context = tls_context(t.cacert) if t.ssl else None
        self._pool = HttpPool(
            host=t.host,
            port=t.port,
            ssl_context=context,
            timeout_s=t.timeout_s,
            max_connections=self._conn_limit,
        )
        outputs = [http.InferRequestedOutput(name, binary_data=True) for name in t.outputs]
        for request in self._requests:
            inputs = []
            for name, arr in request.items():
                inp = http.InferInput(name, list(arr.shape), np_to_triton_dtype(arr.dtype))
                inp.set_data_from_numpy(arr, binary_data=True)
                inputs.append(inp)
            body, json_size = http_aio.InferenceServerClient.generate_request_body(inputs, outputs=outputs)
            self._payloads.append((body, json_size))
        version = f"/versions/{quote(t.model_version)}" if t.model_version else ""
        self._uri = f"{t.path_prefix}/v2/models/{quote(t.model)}{version}/infer"
        self._build_heads()

    def _build_heads(self) -> None:
        if self._pool is None:
            return
        t = self.target
        heads = []
        for body, json_size in self._payloads:
            headers = dict(self._headers)
            if json_size is not None:
                headers["Inference-Header-Content-Length"] = str(json_size)
            heads.append(
                request_head(host=t.host, port=t.port, uri=self._uri, headers=headers, length=len(body))
            )
        self._heads = heads

    def _open_grpc(self) -> None:
        t = self.target
        for channel in grpc_channels(t.client_url, ssl_on=t.ssl, cacert=t.cacert, count=t.grpc_channels):
            self._channels.append(channel)
            # bytes in, bytes out: requests are serialized once below, responses are not decoded
            self._grpc_calls.append(channel.unary_unary("/inference.GRPCInferenceService/ModelInfer"))
        for request in self._requests:
            msg = grpc_infer_request(request, model=t.model, model_version=t.model_version, outputs=t.outputs)
            self._payloads.append((msg.SerializeToString(), None))

    async def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        await close_channels(self._channels)
        self._channels, self._grpc_calls = [], []

    async def send(self) -> Record:
        """Send the next request of the data set; never raises (errors become the record's kind)."""
        t = self.target
        index = self._next_index()
        body, json_size = self._payloads[index]
        kind: str | None = None
        start = time.monotonic_ns()
        try:
            if self._grpc_calls:
                self._turn = (self._turn + 1) % len(self._grpc_calls)
                await self._grpc_calls[self._turn](body, metadata=self._metadata, timeout=t.timeout_s)
            elif self._pool is not None:
                await self._pool.post(self._heads[index], body)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # every failure is data for 'errors by kind'
            kind = error_kind(exc, t.protocol)
        end = time.monotonic_ns()
        return (end, end - start, kind, None)


class _SendsRecords(Protocol):
    target: Target
    headers: Any

    async def open(self) -> None: ...
    async def close(self) -> None: ...
    async def send(self) -> Record: ...


def make_sender(*, target: Target, requests: Sequence[Mapping[str, Array]], conn_limit: int) -> _SendsRecords:
    """The unary :class:`Sender`, the streaming one for a decoupled model, the composed one for
    an LLM-decoder pipeline's front door, or the OpenAI one."""
    if target.openai:
        return OpenAiSender(target=target, requests=requests, conn_limit=conn_limit)
    if target.pipeline is not None:
        return ComposedSender(target=target, requests=requests, conn_limit=conn_limit)
    if target.stream:
        return StreamSender(target=target, requests=requests, conn_limit=conn_limit)
    return Sender(target=target, requests=requests, conn_limit=conn_limit)


class Load(Protocol):
    """A running source of requests at one load level."""

    async def start_step(self, mode: str, level: float, *, poisson: bool, stagger: bool = False) -> None: ...
    async def stop_step(self) -> None: ...
    def set_headers(self, headers: Mapping[str, str]) -> None: ...
    async def drain(self) -> tuple[list[Record], float, int]:
        """Records completed since the last drain, CPU seconds used, delayed sends."""
        ...

    async def close(self) -> None: ...


class LocalLoad:
    """Load from coroutines in this process's event loop."""

    def __init__(self, sender: _SendsRecords) -> None:
        self.sender = sender
        self._records: list[Record] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._in_flight: set[asyncio.Task[None]] = set()
        self._running = False
        self._delayed = 0
        self._cpu_mark = time.process_time()
        self._first = asyncio.Event()  # a staggered step's first request completed
        self._first_latency_s = 0.0

    async def open(self) -> None:
        await self.sender.open()

    def set_headers(self, headers: Mapping[str, str]) -> None:
        self.sender.headers = dict(headers)

    async def _closed_loop(self, slot: int = 0, slots: int = 1) -> None:
        """One concurrency slot: send, wait for the answer, send again. In a staggered step
        (``slots`` > 1) slot 0 starts at once and slot ``i`` once the first request completed
        plus ``i / slots`` of its latency, so the slots' requests start spread over one request's
        time, as independent clients' (or perf_analyzer's one thread per slot) do, not in lock-step."""
        send = self.sender.send
        if slot > 0:
            await self._first.wait()
            await asyncio.sleep(min(self._first_latency_s, MAX_STAGGER_S) * slot / slots)
        while self._running:
            record = await send()
            if not self._first.is_set():
                self._first_latency_s = record[1] / 1e9
                self._first.set()
            self._records.append(record)  # drain() swaps the list: look it up each time

    async def _one(self) -> None:
        record = await self.sender.send()
        # not `self._records.append(await ...)`: that binds the list before the await, and a
        # drain() while the request is in flight swaps it out, losing the record (every
        # request-rate request that spanned a drain was lost, long ones most often)
        self._records.append(record)

    async def _open_loop(self, rate: float, poisson: bool, rng: random.Random) -> None:
        loop = asyncio.get_running_loop()
        interval_ns = 1e9 / rate
        next_ns = float(time.monotonic_ns())
        while self._running:
            next_ns += rng.expovariate(1.0) * interval_ns if poisson else interval_ns
            wait = (next_ns - time.monotonic_ns()) / 1e9
            if wait > 0:
                await asyncio.sleep(wait)
            elif -wait * 1e9 > LATE_NS or len(self._in_flight) >= MAX_IN_FLIGHT:
                self._delayed += 1
            if not self._running:
                break
            if len(self._in_flight) >= MAX_IN_FLIGHT:
                await asyncio.sleep(0.001)
                continue
            task = loop.create_task(self._one())
            self._in_flight.add(task)
            task.add_done_callback(self._in_flight.discard)

    async def start_step(self, mode: str, level: float, *, poisson: bool, stagger: bool = False) -> None:
        self._running = True
        self._delayed = 0
        self._first = asyncio.Event()
        if mode == "concurrency":
            n = int(level)
            self._tasks = [asyncio.create_task(self._closed_loop(i if stagger else 0, n)) for i in range(n)]
            if not stagger:
                self._first.set()
        elif level > 0:
            rng = random.Random(0)
            self._tasks = [asyncio.create_task(self._open_loop(level, poisson, rng))]

    async def stop_step(self) -> None:
        """Stop sending and wait for requests in flight, so the next step starts clean."""
        self._running = False
        self._first.set()  # slots still waiting for the first answer start, see the stop, end
        pending = [*self._tasks, *self._in_flight]
        if pending:
            await asyncio.wait(pending, timeout=self.sender.target.timeout_s + 5)
        for task in pending:
            task.cancel()
        self._tasks = []
        self._records = []

    async def drain(self) -> tuple[list[Record], float, int]:
        records, self._records = self._records, []
        now = time.process_time()
        cpu, self._cpu_mark = now - self._cpu_mark, now
        delayed, self._delayed = self._delayed, 0
        return records, cpu, delayed

    async def close(self) -> None:
        await self.stop_step()
        await self.sender.close()
