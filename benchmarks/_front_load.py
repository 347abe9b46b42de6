"""A load generator cheap enough not to be what it measures: clock_llm streams, direct or through
the OpenAI front, at a fixed concurrency for a fixed window.

- **direct**: one grpc.aio channel, ``ModelStreamInfer`` called as a server stream (one request
  per call, as tritonkit's client does), responses left as raw bytes;
- **front**: one keep-alive HTTP/1.1 connection per concurrent client, ``POST /v1/completions``
  with ``stream: true``, the chunked SSE body read as raw bytes.

Neither side parses what it receives: a token is one occurrence of clock_llm's piece text
(``tick``), counted in the raw bytes, so coalesced SSE events still count every token. TTFT is
the time from writing the request to the first read holding a token. The front's CPU time is read
from ``/proc`` (its process and its children: the workers), before and after the window.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NEEDLE = b"tick"
_CLK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` alone (from /proc; 0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _CLK  # utime, stime


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and every live descendant (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / _CLK  # utime, stime
        todo.extend(children.get(p, []))
    return total


@dataclass
class Window:
    """What the clients saw between ``start`` and ``end``."""

    start: float
    end: float
    tokens: int = 0
    ttft: list[float] = field(default_factory=list)
    requests: int = 0
    errors: list[str] = field(default_factory=list)
    #: tokens an answer holds when they are counted per answer (an engine's pieces do not each hold
    #: one token: a lagging reader's are merged), 0 when each needle read is a token (the clock)
    per_answer: int = 0

    def inside(self, t: float) -> bool:
        return self.start <= t < self.end

    def got(self, t0: float, n: int, first: bool) -> bool:
        """Count ``n`` tokens (pieces, with ``per_answer``) read now by a request sent at ``t0``;
        False once one was seen."""
        if not n:
            return first
        now = time.monotonic()
        if first and self.inside(t0):
            self.ttft.append(now - t0)
        if self.inside(now) and not self.per_answer:
            self.tokens += n
        return False

    def done(self, t0: float) -> None:
        """A request sent at ``t0`` was answered to its end, now."""
        if self.inside(t0):
            self.requests += 1
        if self.per_answer and self.inside(time.monotonic()):
            self.tokens += self.per_answer


def _count(carry: bytes, data: bytes, needle: bytes = NEEDLE) -> tuple[int, bytes]:
    joined = carry + data
    return joined.count(needle), joined[-(len(needle) - 1) :]


async def _direct_client(stub: Any, request: Any, w: Window, stop: float, needle: bytes = NEEDLE) -> None:
    while time.monotonic() < stop:
        t0 = time.monotonic()
        first = True
        try:
            async for message in stub(request):
                first = w.got(t0, message.count(needle), first)
        except Exception as exc:  # noqa: BLE001 - recorded, the load goes on
            w.errors.append(str(exc)[:200])
            await asyncio.sleep(0.05)
            continue
        w.done(t0)


def _http_request(host: str, port: int, model: str, max_tokens: int) -> bytes:
    body = json.dumps(
        {"model": model, "prompt": "Count the ticks.", "max_tokens": max_tokens, "stream": True}
    ).encode()
    head = (
        f"POST /v1/completions HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def _front_client(
    host: str, port: int, payload: bytes, w: Window, stop: float, needle: bytes = NEEDLE
) -> None:
    reader: asyncio.StreamReader | None = None
    writer: asyncio.StreamWriter | None = None
    while time.monotonic() < stop:
        try:
            if writer is None:
                reader, writer = await asyncio.open_connection(host, port)
            assert reader is not None
            t0 = time.monotonic()
            writer.write(payload)
            head = await reader.readuntil(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(head.split(b"\r\n", 1)[0].decode())
            first, carry, tail = True, b"", b""
            while True:
                data = await reader.read(65536)
                if not data:
                    raise RuntimeError("the front closed the connection mid-stream")
                n, carry = _count(carry, data, needle)
                first = w.got(t0, n, first)
                tail = (tail + data)[-64:]
                if tail.endswith(b"\r\n0\r\n\r\n") and b"[DONE]" in tail:
                    break
            w.done(t0)
        except Exception as exc:  # noqa: BLE001 - recorded, the load goes on with a new connection
            w.errors.append(f"{type(exc).__name__}: {exc}"[:200])
            if writer is not None:
                writer.close()
            reader = writer = None
            await asyncio.sleep(0.05)
    if writer is not None:
        writer.close()


def clock_stream_request(model: str, max_tokens: int) -> Any:
    """A ``ModelInferRequest`` of the vLLM contract for the clock model (the prompt the soak and load
    send), asking for the flags-only final response, as tritonkit's client sends it."""
    import numpy as np

    from tritonkit.client._inputs import PreparedInput
    from tritonkit.client._llm import llm_inputs
    from tritonkit.client._stream_grpc import grpc_request

    inputs = llm_inputs(
        "Count the ticks.", sampling={"max_tokens": max_tokens}, stream=True, exclude_input_in_output=True
    )
    prepared = [PreparedInput(k, "BYTES" if v.dtype == np.object_ else "BOOL", v) for k, v in inputs.items()]
    return grpc_request(model, prepared)


def stream_stub(channel: Any) -> Any:
    """``ModelStreamInfer`` on a grpc.aio channel as a server stream (one request per call, as
    tritonkit's client calls it), its responses left as raw bytes."""
    from tritonclient.grpc import service_pb2

    return channel.unary_stream(
        "/inference.GRPCInferenceService/ModelStreamInfer",
        request_serializer=service_pb2.ModelInferRequest.SerializeToString,
        response_deserializer=None,
    )


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def _run(
    tool: str,
    conc: int,
    *,
    grpc_address: str,
    front: tuple[str, int],
    model: str,
    max_tokens: int,
    warmup_s: float,
    window_s: float,
) -> Window:
    begin = time.monotonic()
    w = Window(begin + warmup_s, begin + warmup_s + window_s)
    stop = w.end
    if tool == "direct":
        import grpc

        request = clock_stream_request(model, max_tokens)
        async with grpc.aio.insecure_channel(grpc_address) as channel:
            stub = stream_stub(channel)
            await asyncio.gather(*(_direct_client(stub, request, w, stop) for _ in range(conc)))
    else:
        host, port = front
        payload = _http_request(host, port, model, max_tokens)
        await asyncio.gather(*(_front_client(host, port, payload, w, stop) for _ in range(conc)))
    return w


def measure(
    tool: str,
    conc: int,
    *,
    grpc_address: str,
    front: tuple[str, int],
    front_pid: int | None,
    server_pid: int | None,
    model: str = "clock_llm",
    max_tokens: int = 32,
    warmup_s: float = 2.0,
    window_s: float = 8.0,
) -> dict[str, Any]:
    """One window of ``conc`` clients of ``tool`` ("direct" or "front"): the figures as a dict."""
    holder: dict[str, float] = {}

    async def main() -> Window:
        loop = asyncio.get_running_loop()

        def mark(key: str) -> None:
            holder[f"front_{key}"] = tree_cpu_seconds(front_pid) if front_pid else 0.0
            holder[f"server_{key}"] = tree_cpu_seconds(server_pid) if server_pid else 0.0
            # tritonserver itself (its gRPC server); the rest of its tree is the Python stub
            holder[f"triton_{key}"] = cpu_seconds(server_pid) if server_pid else 0.0
            holder[f"client_{key}"] = time.process_time()
            holder[f"wall_{key}"] = time.monotonic()

        task = asyncio.ensure_future(
            _run(
                tool, conc, grpc_address=grpc_address, front=front, model=model,
                max_tokens=max_tokens, warmup_s=warmup_s, window_s=window_s,
            )
        )  # fmt: skip
        loop.call_later(warmup_s, mark, "0")
        loop.call_later(warmup_s + window_s, mark, "1")
        return await task

    load0 = os.getloadavg()[0]
    w = asyncio.run(main())
    wall = holder["wall_1"] - holder["wall_0"]
    front_cpu = holder["front_1"] - holder["front_0"]
    tokens = w.tokens
    return {
        "tool": tool,
        "concurrency": conc,
        "window_s": round(wall, 3),
        "tokens": tokens,
        "requests": w.requests,
        "errors": len(w.errors),
        "error_sample": w.errors[:3],
        "tokens_per_s": tokens / wall if wall > 0 else None,
        "ttft_p50_ms": (_percentile(w.ttft, 0.5) or 0) * 1000 if w.ttft else None,
        "ttft_p99_ms": (_percentile(w.ttft, 0.99) or 0) * 1000 if w.ttft else None,
        "ttft_mean_ms": statistics.fmean(w.ttft) * 1000 if w.ttft else None,
        "front_cpu_s": front_cpu if tool == "front" else None,
        "front_cpu_us_per_token": front_cpu / tokens * 1e6 if tool == "front" and tokens else None,
        "front_cores": front_cpu / wall if tool == "front" and wall > 0 else None,
        "server_cores": (holder["server_1"] - holder["server_0"]) / wall if wall > 0 else None,
        "client_cores": (holder["client_1"] - holder["client_0"]) / wall if wall > 0 else None,
        "tritonserver_cores": (holder["triton_1"] - holder["triton_0"]) / wall if wall > 0 else None,
        "stub_cores": (
            (holder["server_1"] - holder["server_0"] - holder["triton_1"] + holder["triton_0"]) / wall
            if wall > 0
            else None
        ),
        "load_avg": [load0, os.getloadavg()[0]],
    }
