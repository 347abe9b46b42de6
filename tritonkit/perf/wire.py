"""The coordinator/worker wire: length-prefixed JSON frames over asyncio streams.

One frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON holding one object
with an ``op``. JSON, not pickle: a worker pod and the coordinator may run different Python
builds, and a frame from the network must never execute anything when read. The request data
set (numpy arrays) and the call :class:`~tritonkit.perf._target.Target` cross it once, at
set-up; per-request records cross it as plain lists.

Messages (coordinator -> worker unless marked):

- worker -> ``hello`` {name, pid, host}; ``ping`` / worker -> ``pong`` {t: worker monotonic ns}
- ``setup`` {target, requests, conn_limit} / worker -> ``ready`` or ``failed`` {error}
- ``headers`` {headers}; ``start`` {mode, level, poisson, stagger, at_ns (worker clock)}
- ``drain`` / worker -> ``records`` {records, cpu_s, delayed, lags_ns, as_of_ns}
- ``stop`` / worker -> ``stopped``; ``exit``
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import struct
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tritonkit._timeouts import within
from tritonkit.errors import PerfError
from tritonkit.llm_pipeline import ComposedPipeline
from tritonkit.perf._target import Record, Target
from tritonkit.perf.inputs import Array

__all__ = [
    "MAX_FRAME",
    "WireClosedError",
    "decode_requests",
    "decode_target",
    "encode_requests",
    "encode_target",
    "frame",
    "read_frame",
    "records_from_wire",
    "write_frame",
]

#: the largest frame either side accepts (a data set of large tensors crosses in one frame)
MAX_FRAME = 512 * 1024 * 1024
_HEAD = struct.Struct(">I")


class WireClosedError(PerfError):
    """The other side closed the connection, or sent something that is not a frame."""


def frame(message: Mapping[str, Any]) -> bytes:
    """One message as the bytes of its frame."""
    body = json.dumps(message, separators=(",", ":")).encode()
    return _HEAD.pack(len(body)) + body


async def write_frame(writer: asyncio.StreamWriter, message: Mapping[str, Any]) -> None:
    """Send one message and wait until the transport took it."""
    writer.write(frame(message))
    await writer.drain()


async def read_frame(reader: asyncio.StreamReader, *, timeout_s: float, waiting_for: str) -> dict[str, Any]:
    """Read one message; a closed stream raises :class:`WireClosedError`, silence past ``timeout_s``
    a :class:`PerfError` naming what was awaited."""
    try:
        body = await within(_read_body(reader), timeout_s)
    except (TimeoutError, asyncio.TimeoutError) as exc:
        raise PerfError(f"nothing came within {timeout_s:.0f}s while waiting for {waiting_for}") from exc
    except (asyncio.IncompleteReadError, ConnectionError, OSError) as exc:
        raise WireClosedError(f"the connection closed while waiting for {waiting_for}") from exc
    try:
        message = json.loads(body)
    except ValueError as exc:
        raise WireClosedError(f"a frame that is not JSON came while waiting for {waiting_for}") from exc
    if not isinstance(message, dict) or not isinstance(message.get("op"), str):
        raise WireClosedError(f"a frame without an 'op' came while waiting for {waiting_for}")
    return message


async def _read_body(reader: asyncio.StreamReader) -> bytes:
    (size,) = _HEAD.unpack(await reader.readexactly(_HEAD.size))
    if size > MAX_FRAME:
        raise WireClosedError(f"a frame of {size} bytes is past the {MAX_FRAME}-byte limit")
    return await reader.readexactly(size)


# --- what crosses once, at set-up ---------------------------------------------------------------


def encode_target(target: Target) -> dict[str, Any]:
    return dataclasses.asdict(target)


def decode_target(data: Mapping[str, Any]) -> Target:
    fields = dict(data)
    fields["outputs"] = tuple(fields.get("outputs", ()))
    fields["prompt_counts"] = tuple(tuple(pair) for pair in fields.get("prompt_counts", ()))
    fields["stage_inputs"] = tuple(fields.get("stage_inputs", ()))
    if fields.get("pipeline") is not None:
        pipeline = dict(fields["pipeline"])
        pipeline["prompt_inputs"] = tuple(pipeline["prompt_inputs"])
        fields["pipeline"] = ComposedPipeline(**pipeline)
    return Target(**fields)


def _encode_array(arr: Array) -> dict[str, Any]:
    if arr.dtype == np.object_:
        items = [
            {"b": base64.b64encode(v).decode()} if isinstance(v, bytes) else {"s": str(v)}
            for v in arr.ravel()
        ]
        return {"dtype": "object", "shape": list(arr.shape), "items": items}
    data = np.ascontiguousarray(arr)
    return {
        "dtype": data.dtype.str,
        "shape": list(arr.shape),
        "data": base64.b64encode(data.tobytes()).decode(),
    }


def _decode_array(data: Mapping[str, Any]) -> Array:
    shape = tuple(int(d) for d in data["shape"])
    if data["dtype"] == "object":
        values = [base64.b64decode(i["b"]) if "b" in i else i["s"] for i in data["items"]]
        out = np.empty(len(values), dtype=np.object_)
        out[:] = values
        return out.reshape(shape)
    raw = base64.b64decode(data["data"])
    return np.frombuffer(raw, dtype=np.dtype(data["dtype"])).reshape(shape).copy()


def encode_requests(requests: Sequence[Mapping[str, Array]]) -> list[dict[str, Any]]:
    return [{name: _encode_array(arr) for name, arr in request.items()} for request in requests]


def decode_requests(data: Sequence[Mapping[str, Any]]) -> list[dict[str, Array]]:
    return [{name: _decode_array(arr) for name, arr in request.items()} for request in data]


def records_from_wire(rows: Sequence[Sequence[Any]], offset_ns: int) -> list[Record]:
    """A worker's records on the coordinator's clock: each completion time less the worker's
    clock offset (latencies are differences on one clock and need no shift)."""
    out: list[Record] = []
    for end, latency, kind, stream in rows:
        out.append((int(end) - offset_ns, int(latency), kind, tuple(stream) if stream is not None else None))
    return out
