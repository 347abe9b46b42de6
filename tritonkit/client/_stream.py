"""What a streamed (decoupled) inference looks like on the wire, as small reusable functions.

Two wire formats carry one request's many responses:

- gRPC ``ModelStreamInfer`` (bidirectional): we send one ``ModelInferRequest`` with
  ``triton_enable_empty_final_response`` and read ``ModelStreamInferResponse`` messages until one
  carries ``triton_final_response = true`` or the server ends the call. A response may be
  flags-only (no outputs): it ends the stream and is not a piece.
- HTTP ``POST /v2/models/NAME[/versions/V]/generate_stream`` (Triton's generate extension):
  a JSON body ``{input name: value, "id": ..., "parameters": {...}}``; server-sent events, one
  ``data: {json}`` per response with each output as a JSON field (one element: a scalar, more: a
  flat list; shapes are not sent), plus ``id``, ``model_name``, ``model_version`` and response
  parameters. ``data: {"error": ...}`` is an error, also after HTTP 200. The stream ends with the
  HTTP body; a flags-only final response sends nothing.

Nothing here does I/O: the transports (``_stream_transport``) and the perf load engine share these
functions (parse, decode, classify); the gRPC messages are built and read in ``_stream_grpc``.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncGenerator, Callable, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tritonkit.client._errors import CallContext, classify
from tritonkit.client._inputs import ModelInfo, PreparedInput, TensorInfo
from tritonkit.errors import (
    ClientError,
    InferenceError,
    InputMismatchError,
    RequestTimeoutError,
    StreamError,
    StreamStalledError,
    StreamTimeoutError,
)

__all__ = [
    "AsyncResponseStream",
    "ParamValue",
    "ResponseStream",
    "SseEvent",
    "SseParser",
    "StreamError",
    "StreamPlan",
    "StreamResponse",
    "StreamStats",
    "StreamTimeoutError",
    "StreamWaits",
    "decode_sse_data",
    "error_text",
    "fit_shape",
    "generate_body",
    "next_wait",
    "stream_failure",
    "stream_path",
]

ParamValue = bool | int | float | str

#: gRPC request parameter that asks Triton for the flags-only final response.
EMPTY_FINAL_PARAM = "triton_enable_empty_final_response"
#: gRPC response parameter set on the last response of a request.
FINAL_PARAM = "triton_final_response"
#: Fields of a generate_stream event that describe the response, not an output or parameter.
_SSE_RESERVED = ("id", "model_name", "model_version")


@dataclass(frozen=True)
class StreamWaits:
    """A stream's timeouts in seconds (None: no limit): for the first response, between two
    responses, and for the whole stream."""

    first: float | None
    gap: float | None
    total: float | None = None


@dataclass(frozen=True)
class StreamPlan:
    """One streamed request, checked and built before anything is sent: what the clients open a
    stream with (``payload``: gRPC ModelInferRequest or the generate_stream JSON body)."""

    model: str
    version: str
    info: ModelInfo
    wanted: list[str] | None
    payload: Any
    waits: StreamWaits
    action: str


@dataclass(frozen=True)
class StreamResponse:
    """One response of a streamed inference: its outputs as numpy, and what the server said of it.

    ``outputs`` maps output name to array (``response["NAME"]`` reads one). ``index`` counts the
    responses of this request from 0. ``final`` is True when the server marked this response as
    the last one (gRPC ``triton_final_response``; SSE events carry no such flag, so there it is
    False: on both, the iteration ending is the end of the stream). ``parameters`` are the
    response parameters the model set (without Triton's own ``triton_*`` bookkeeping).
    """

    outputs: Mapping[str, NDArray[Any]]
    index: int
    final: bool = False
    request_id: str = ""
    model: str = ""
    version: str = ""
    parameters: Mapping[str, ParamValue] = field(default_factory=dict)

    def __getitem__(self, name: str) -> NDArray[Any]:
        return self.outputs[name]

    def text(self, name: str) -> str:
        """The BYTES output ``name`` as text: its elements decoded as UTF-8 and joined."""
        outputs = self.outputs
        raw_text = getattr(outputs, "text", None)  # gRPC outputs read text straight from raw BYTES
        if raw_text is not None:
            text: str | None = raw_text(name)
            if text is not None:
                return text
        values = outputs[name].reshape(-1).tolist()
        return "".join(v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in values)


@dataclass
class StreamStats:
    """Timing of one stream, kept as it runs (``time.monotonic`` seconds)."""

    started: float = field(default_factory=time.monotonic)
    first: float | None = None
    last: float | None = None
    responses: int = 0

    def record(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        if self.first is None:
            self.first = now
        self.last = now
        self.responses += 1

    @property
    def time_to_first(self) -> float | None:
        """Seconds from sending the request to the first response (None before it)."""
        return None if self.first is None else self.first - self.started

    @property
    def elapsed(self) -> float:
        """Seconds from sending the request to the last response so far (or to now, before one)."""
        return (self.last if self.last is not None else time.monotonic()) - self.started

    @property
    def rate(self) -> float | None:
        """Responses per second after the first one (None with fewer than two responses)."""
        if self.first is None or self.last is None or self.responses < 2 or self.last <= self.first:
            return None
        return (self.responses - 1) / (self.last - self.first)


# -- server-sent events ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SseEvent:
    data: str
    event: str = "message"
    id: str | None = None


class SseParser:
    """Incremental server-sent-events parser (WHATWG "event stream interpretation").

    Feed it lines without their line ending (``httpx``'s ``iter_lines`` splits on CR, LF and
    CRLF); a blank line dispatches the event collected so far. Comment lines (``:``) are ignored,
    multi-line ``data`` is joined with LF, and an event without data is dropped, as the standard
    says. An unterminated event at the end of the body is dropped too: it was cut off.
    """

    def __init__(self) -> None:
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None

    def feed(self, line: str) -> SseEvent | None:
        if not line:
            if not self._data:
                self._event = ""
                return None
            event = SseEvent("\n".join(self._data), self._event or "message", self._id)
            self._data, self._event = [], ""
            return event
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value
        return None  # "retry" and unknown fields do not concern a one-shot client

    def events(self, lines: Iterable[str]) -> Iterator[SseEvent]:
        for line in lines:
            event = self.feed(line)
            if event is not None:
                yield event


def fit_shape(dims: Sequence[int], count: int) -> tuple[int, ...] | None:
    """The shape Triton gives ``count`` flat values for a tensor of ``dims`` (-1 = any).

    Mirrors Triton's generate extension (``ExactMappingInput`` in ``http_server.cc``): fixed
    dimensions take their size from the innermost out, the innermost ``-1`` takes what is left
    and any other ``-1`` becomes 1. None when the values do not fit.
    """
    if not dims:
        return () if count == 1 else None
    remaining = count
    for d in reversed(dims):
        if d > 0:
            if remaining % d:
                return None
            remaining //= d
        elif d == 0:
            return tuple(dims) if count == 0 and all(x >= 0 for x in dims) else None
    shape = list(dims)
    for i in range(len(shape) - 1, -1, -1):
        if shape[i] < 0:
            shape[i] = remaining
            remaining = 1
    return tuple(shape) if remaining == 1 else None


def _full_dims(info: ModelInfo, tensor: TensorInfo) -> tuple[int, ...]:
    return (-1, *tensor.dims) if info.batching else tensor.dims


def _json_to_array(value: Any, tensor: TensorInfo | None, info: ModelInfo | None) -> NDArray[Any]:
    flat = value if isinstance(value, list) else [value]
    if tensor is not None and tensor.datatype == "BYTES":
        arr: NDArray[Any] = np.empty(len(flat), dtype=object)
        arr[:] = [v.encode("utf-8") if isinstance(v, str) else json.dumps(v).encode() for v in flat]
    elif tensor is not None and tensor.np_dtype is not None:
        arr = np.asarray(flat, dtype=tensor.np_dtype)
    else:
        arr = np.asarray(flat)
    if tensor is not None and info is not None:
        shape = fit_shape(_full_dims(info, tensor), arr.size)
        if shape is not None:
            return arr.reshape(shape)
    return arr


class _SseOutputs(Mapping[str, NDArray[Any]]):
    """A generate_stream event's outputs, each made a numpy array when first read; :meth:`text`
    reads a BYTES output's JSON string(s) with no numpy (the OpenAI front's relay reads one short
    text per event, issue #40)."""

    __slots__ = ("_arrays", "_info", "_tensors", "_values")

    def __init__(
        self, values: dict[str, Any], tensors: dict[str, TensorInfo | None], info: ModelInfo | None
    ) -> None:
        self._values, self._tensors, self._info = values, tensors, info
        self._arrays: dict[str, NDArray[Any]] = {}

    def __getitem__(self, name: str) -> NDArray[Any]:
        arr = self._arrays.get(name)
        if arr is None:
            arr = self._arrays[name] = _json_to_array(self._values[name], self._tensors[name], self._info)
        return arr

    def __contains__(self, name: object) -> bool:  # Mapping's own would decode to find out
        return name in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def text(self, name: str) -> str | None:
        """A BYTES output's text (its strings joined); None when it is not strings."""
        tensor = self._tensors[name]
        if tensor is None or tensor.datatype != "BYTES":
            return None
        value = self._values[name]
        if isinstance(value, str):
            return value
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return "".join(value)
        return None


def decode_sse_data(
    data: str | bytes, info: ModelInfo | None, *, index: int, wanted: Sequence[str] | None = None
) -> StreamResponse:
    """One generate_stream event as a StreamResponse; raises StreamError for an error event.

    Outputs are reshaped to the model's output dims the way Triton shapes generate inputs (SSE
    sends flat values; each when first read); an output that does not fit stays flat. ``wanted``
    keeps only those outputs (generate_stream always sends all of them).
    """
    try:
        body = json.loads(data)
    except json.JSONDecodeError as exc:
        raise StreamError(f"the server sent an event that is not JSON ({exc}): {data[:200]!r}") from exc
    if not isinstance(body, dict):
        raise StreamError(f"the server sent an event that is not a JSON object: {data[:200]!r}")
    if "error" in body:
        raise StreamError(str(body["error"]))
    by_name = info.output_map if info is not None else {}
    values: dict[str, Any] = {}
    tensors: dict[str, TensorInfo | None] = {}
    parameters: dict[str, ParamValue] = {}
    for key, value in body.items():
        if key in _SSE_RESERVED:
            continue
        tensor = by_name.get(key)
        if tensor is not None or (info is None and isinstance(value, list)):
            if wanted is None or key in wanted:
                values[key], tensors[key] = value, tensor
        elif isinstance(value, (bool, int, float, str)) and not key.startswith("triton_"):
            parameters[key] = value
    return StreamResponse(
        outputs=_SseOutputs(values, tensors, info),
        index=index,
        final=False,
        request_id=str(body.get("id", "")),
        model=str(body.get("model_name", "")),
        version=str(body.get("model_version", "")),
        parameters=parameters,
    )


def _json_value(p: PreparedInput, info: ModelInfo) -> list[Any]:
    arr = p.array
    tensor = info.input_map[p.name]
    expected = fit_shape(_full_dims(info, tensor), int(arr.size))
    if expected != tuple(arr.shape):
        raise InputMismatchError(
            f"input '{p.name}' of model '{info.name}' has shape {list(arr.shape)}, which HTTP "
            f"generate_stream cannot carry: it sends flat values and Triton would shape them "
            f"{list(expected) if expected is not None else 'not at all'}",
            hint="use protocol='grpc' (CLI: --protocol grpc), which sends shapes",
        )
    flat = arr.reshape(-1).tolist()
    if p.datatype == "BYTES":
        texts = []
        for v in flat:
            try:
                texts.append(v.decode("utf-8") if isinstance(v, bytes) else str(v))
            except UnicodeDecodeError:
                raise InputMismatchError(
                    f"input '{p.name}' of model '{info.name}' holds bytes that are not UTF-8 text; "
                    "HTTP generate_stream carries BYTES as JSON strings",
                    hint="use protocol='grpc' (CLI: --protocol grpc) for binary BYTES inputs",
                ) from None
        return texts
    if arr.dtype.kind == "f" and not np.isfinite(arr).all():
        raise InputMismatchError(
            f"input '{p.name}' of model '{info.name}' holds NaN or infinity, which JSON cannot carry",
            hint="use protocol='grpc' (CLI: --protocol grpc), which sends raw tensors",
        )
    return list(flat)


def generate_body(
    info: ModelInfo,
    inputs: Sequence[PreparedInput],
    *,
    request_id: str = "",
    parameters: Mapping[str, ParamValue] | None = None,
) -> bytes:
    """The JSON body of a generate_stream request (checked: what JSON cannot carry is refused)."""
    body: dict[str, Any] = {p.name: _json_value(p, info) for p in inputs}
    if request_id:
        body["id"] = request_id
    if parameters:
        body["parameters"] = dict(parameters)
    return json.dumps(body, allow_nan=False).encode()


def error_text(body: bytes, content_type: str) -> str:
    """The server's reason in a refused generate_stream answer.

    Triton answers a request it refuses before inference with ``{"error": ...}`` as JSON, and a
    first response that is an error with status 400 and an event stream of ``data: {"error": ...}``.
    """
    text = body.decode("utf-8", "replace")
    if "event-stream" in content_type:
        for event in SseParser().events([*text.splitlines(), ""]):
            text = event.data
            break
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        return text.strip()[:500]
    if isinstance(parsed, dict) and "error" in parsed:
        return str(parsed["error"])
    return text.strip()[:500]


def stream_path(model: str, version: str = "") -> str:
    """``v2/models/NAME[/versions/V]/generate_stream`` with the name escaped."""
    from urllib.parse import quote

    path = f"v2/models/{quote(model, safe='')}"
    if version:
        path += f"/versions/{quote(version, safe='')}"
    return path + "/generate_stream"


# -- what the clients return ----------------------------------------------------------------------


class ResponseStream:
    """The responses of one streamed inference, as they arrive (an iterator).

    The request goes out on the first ``next()``. Leaving early cancels it on the server:
    ``break`` out of a ``for`` loop (CPython closes the dropped iterator at once), ``close()``,
    a ``with`` block, or an exception such as Ctrl-C inside the loop. ``stats`` has the time to
    the first response, the count and the rate so far.
    """

    def __init__(self, responses: Generator[StreamResponse, None, None], stats: StreamStats) -> None:
        self._responses = responses
        self.stats = stats

    def __iter__(self) -> ResponseStream:
        return self

    def __next__(self) -> StreamResponse:
        return next(self._responses)

    def close(self) -> None:
        """Stop reading and cancel the request if it is still running."""
        self._responses.close()

    def __enter__(self) -> ResponseStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncResponseStream:
    """The async twin of :class:`ResponseStream` (``async for``; ``await aclose()``; ``async with``).

    Cancelling the task that iterates cancels the request. A bare ``break`` leaves the closing to
    asyncio's async-generator finaliser, which runs soon but not at once: prefer ``async with``.
    """

    def __init__(
        self,
        responses: AsyncGenerator[StreamResponse, None]
        | Callable[[AsyncResponseStream], AsyncGenerator[StreamResponse, None]],
        stats: StreamStats,
    ) -> None:
        """``responses``: the responses, or what makes them given this stream (to fill in
        :attr:`call` and :attr:`waits`)."""
        self.stats = stats
        #: once the first response came: the transport's open call (an HTTP stream's
        #: ``H1SseCall``, read directly by the OpenAI front's relay) and the waits it runs under
        self.call: Any = None
        self.waits: StreamWaits | None = None
        self._responses = responses(self) if callable(responses) else responses

    def __aiter__(self) -> AsyncResponseStream:
        return self

    async def __anext__(self) -> StreamResponse:
        return await self._responses.__anext__()

    async def aclose(self) -> None:
        """Stop reading and cancel the request if it is still running."""
        await self._responses.aclose()

    async def __aenter__(self) -> AsyncResponseStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


# -- waits and failures (shared by both clients and the perf load engine) --------------------------


def next_wait(stats: StreamStats, waits: StreamWaits) -> float | None:
    """How long the next response may take: the first/gap wait, cut by what is left of the total."""
    wait = waits.first if stats.responses == 0 else waits.gap
    if waits.total is not None:
        left = max(0.0, waits.total - (time.monotonic() - stats.started))
        wait = left if wait is None else min(wait, left)
    return wait


def stream_failure(exc: Exception, ctx: CallContext, stats: StreamStats, waits: StreamWaits) -> ClientError:
    """The ClientError for anything that ended a stream: an error the server sent in it
    (InferenceError, saying after how many responses), a wait that ran out (RequestTimeoutError,
    saying which), or a transport failure (``classify``)."""
    where = f"{ctx.action} at {ctx.endpoint}"
    n = stats.responses
    if isinstance(exc, StreamError):
        return InferenceError(
            f"{where} failed after {n} response(s): {exc.message}",
            hint="the model reported this error in its stream; see its inputs and the server log",
        )
    if isinstance(exc, StreamTimeoutError):
        total_over = waits.total is not None and time.monotonic() - stats.started >= waits.total - 1e-3
        if exc.which == "total" or total_over:
            message = f"{where} did not finish within total_timeout={waits.total:g}s ({n} response(s) so far)"
        elif n == 0:
            message = f"{where} got no first response within {waits.first:g}s"
        else:
            return StreamStalledError(
                f"{where} stalled: no response for {waits.gap:g}s after response {n}; the request "
                "was cancelled on the server",
                hint="the model or the server stopped sending mid-answer (see its log); raise "
                "response_timeout (CLI --timeout) if its pieces are this far apart",
            )
        return RequestTimeoutError(
            message,
            hint="raise first_response_timeout / response_timeout / total_timeout (CLI --timeout), "
            "or check the server load",
        )
    error = classify(exc, ctx).error
    if n:
        error.message = f"{error.message} (the stream broke after {n} response(s))"
        error.args = (error.message,)
    return error
