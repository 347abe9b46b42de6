"""Streaming from the pipelines without tritonkit: tritonclient's gRPC stream and raw SSE.

``stream_grpc`` uses tritonclient's bidirectional-stream API (``start_stream`` /
``async_stream_infer``); ``stream_sse`` reads Triton's HTTP ``generate_stream`` endpoint
(server-sent events) with the standard library. Both are what any client does; the integration
tests, the hostile soak (benchmarks/hostile.py) and the streaming benchmark
(benchmarks/streaming.py) use them as clients tritonkit did not write.
"""

from __future__ import annotations

import http.client
import json
import queue
import re
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: a stream silent this long counts as lost
STREAM_TIMEOUT_S = 30.0
_COUNTER = re.compile(r'^(tritonkit_[a-z_]+)\{instance="[^"]*",model="([^"]+)"\} ([0-9.e+-]+)$')


@dataclass
class Stream:
    """What one streamed request produced."""

    pieces: list[str] = field(default_factory=list)
    error: str | None = None
    status: str | None = None  # the HTTP status for SSE; None for gRPC (stream errors carry no code)
    final: bool = False  # the server said the stream is complete
    first_s: float | None = None  # time to first piece
    last_s: float | None = None  # time to last piece
    total_s: float = 0.0
    events: int = 0  # responses / SSE events received, pieces and the final one included

    @property
    def text(self) -> str:
        return "".join(self.pieces)

    @property
    def pieces_per_s(self) -> float | None:
        """The decode rate: pieces after the first over the time from the first to the last."""
        if self.first_s is None or self.last_s is None or len(self.pieces) < 2 or self.last_s <= self.first_s:
            return None
        return (len(self.pieces) - 1) / (self.last_s - self.first_s)


def _json_value(value: np.ndarray) -> Any:
    """A tensor as generate_stream's JSON takes it: a scalar for one element, else a flat list."""
    flat = value.ravel()
    items = [v.decode("utf-8", "replace") if isinstance(v, bytes) else v.item() for v in flat]
    return items[0] if value.size == 1 and value.ndim <= 1 and value.dtype != np.uint8 else items


def grpc_inputs(inputs: dict[str, np.ndarray]) -> list[Any]:
    """tritonclient gRPC ``InferInput`` tensors of ``inputs``, typed from their numpy dtypes."""
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import np_to_triton_dtype

    tensors = []
    for name, value in inputs.items():
        tensor = grpcclient.InferInput(name, list(value.shape), np_to_triton_dtype(value.dtype))
        tensor.set_data_from_numpy(value)
        tensors.append(tensor)
    return tensors


def stream_grpc(
    client: Any,
    model: str,
    inputs: dict[str, np.ndarray],
    *,
    stop_after: int | None = None,
    on_piece: Callable[[str], None] | None = None,
    output: str = "GENERATED_TEXT",
) -> Stream:
    """One request over a fresh tritonclient gRPC stream; ``stop_after`` pieces: cancel it there."""
    from tritonclient.utils import InferenceServerException

    tensors = grpc_inputs(inputs)
    answers: queue.Queue[tuple[Any, Any]] = queue.Queue()
    result = Stream()
    gave_up = False  # no response came in time: the server still owes this request its answer
    started = time.perf_counter()
    try:
        client.start_stream(callback=lambda result, error: answers.put((result, error)))
        client.async_stream_infer(model, tensors, enable_empty_final_response=True)
        while True:
            try:
                response, error = answers.get(timeout=STREAM_TIMEOUT_S)
            except queue.Empty:
                result.error = f"no response within {STREAM_TIMEOUT_S:g}s"
                gave_up = True
                break
            result.events += 1
            if error is not None:
                result.error = error.message()
                break
            out = response.as_numpy(output)
            if out is not None:
                piece = out.ravel()[0].decode("utf-8")
                result.last_s = time.perf_counter() - started
                result.first_s = result.first_s or result.last_s
                result.pieces.append(piece)
                if on_piece is not None:
                    on_piece(piece)
            if response.get_response().parameters["triton_final_response"].bool_param:
                result.final = True
                break
            if stop_after is not None and len(result.pieces) >= stop_after:
                break
    except InferenceServerException as exc:  # the stream broke (a server going down shows up here)
        result.error = f"gRPC stream: {exc.message()}"
    finally:
        # cancel what the server still owes: a client that left on purpose, or one that gave up
        # waiting (without cancelling, stop_stream waits for the server's final response forever)
        client.stop_stream(cancel_requests=stop_after is not None or gave_up)
    result.total_s = time.perf_counter() - started
    return result


def stream_sse(
    http_address: str,
    model: str,
    inputs: dict[str, np.ndarray],
    *,
    stop_after: int | None = None,
    on_piece: Callable[[str], None] | None = None,
    output: str = "GENERATED_TEXT",
) -> Stream:
    """One request to ``/v2/models/MODEL/generate_stream``, read event by event (server-sent events)."""
    host, port = http_address.rsplit(":", 1)
    body = json.dumps({name: _json_value(value) for name, value in inputs.items()})
    result = Stream()
    started = time.perf_counter()
    connection = http.client.HTTPConnection(host, int(port), timeout=STREAM_TIMEOUT_S)
    try:
        connection.request(
            "POST", f"/v2/models/{model}/generate_stream", body=body,
            headers={"Content-Type": "application/json", "Accept": "text/event-stream"},
        )
        response = connection.getresponse()
        result.status = str(response.status)
        while True:
            line = response.readline()
            if not line:  # the server closed the stream: it is complete
                result.final = result.error is None
                break
            if not line.startswith(b"data:"):
                continue
            result.events += 1
            event = json.loads(line[5:])
            if "error" in event:
                result.error = str(event["error"])
                continue
            piece = str(event[output])
            result.last_s = time.perf_counter() - started
            result.first_s = result.first_s or result.last_s
            result.pieces.append(piece)
            if on_piece is not None:
                on_piece(piece)
            if stop_after is not None and len(result.pieces) >= stop_after:
                break  # leave without reading on: closing the connection is the client vanishing
    except (OSError, http.client.HTTPException, ValueError) as exc:
        result.error = f"{type(exc).__name__}: {exc}"
    finally:
        connection.close()
    result.total_s = time.perf_counter() - started
    return result


def decoder_counters(metrics_url: str) -> dict[tuple[str, str], float]:
    """(counter, model) -> value of the decoders' tritonkit_* metrics, summed over instances."""
    with urllib.request.urlopen(metrics_url, timeout=10) as response:  # noqa: S310 - loopback URL
        text = response.read().decode()
    counters: dict[tuple[str, str], float] = {}
    for line in text.splitlines():
        match = _COUNTER.match(line)
        if match:
            key = (match.group(1), match.group(2))
            counters[key] = counters.get(key, 0.0) + float(match.group(3))
    return counters
