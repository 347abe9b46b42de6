"""Open one streamed inference over gRPC (grpc / grpc.aio) or HTTP server-sent events (httpx;
asyncio: ``_stream_h1``).

Each ``open_*`` returns a call with ``next(timeout)`` -> the next :class:`StreamResponse`, or None
at the end of the stream, and ``cancel()``. Like ``_transport`` they do no retries and no error
mapping: foreign errors come out as tritonclient's ``InferenceServerException`` (status + message,
what ``_errors.classify`` reads), as httpx's own exceptions (sync) or as ``ConnectionError``
(asyncio); an error the server sent inside the
stream as ``StreamError``; a response that did not come in time as ``StreamTimeoutError``.

Cancelling: gRPC cancels the call (Triton cancels the request: the model sees
``is_cancelled()``); HTTP closes the connection, which Triton 2.51 also turns into a cancellation
of a generate_stream request (measured: tests/integration/test_client_stream.py).
"""

from __future__ import annotations

import asyncio
import queue
import socket
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tritonkit._timeouts import within
from tritonkit.client._errors import RETRY_AFTER_ATTR
from tritonkit.client._stream import (
    SseParser,
    StreamError,
    StreamPlan,
    StreamResponse,
    StreamTimeoutError,
    decode_sse_data,
    error_text,
    stream_path,
)
from tritonkit.client._stream_grpc import decode_grpc_response
from tritonkit.client._stream_h1 import H1Pool, H1SseCall
from tritonkit.client._transport import _grpc_headers
from tritonkit.client.connection import grpc_channel, httpx_verify, tls_context
from tritonkit.client.endpoint import Endpoint
from tritonkit.client.retry import parse_retry_after

Headers = Mapping[str, str]

_END = object()
#: a read whose wait ends within this of the call's deadline is left to the deadline (seconds)
_DEADLINE_SLACK = 0.005
_STREAM_METHOD = "/inference.GRPCInferenceService/ModelStreamInfer"


def _one_request_stream(channel: Any) -> Any:
    """ModelStreamInfer on ``channel`` (grpc or grpc.aio) called as a server-streaming method.

    We send one request per stream, so grpc sends the headers, the request and the end of the
    request side in one write. Called as the bidirectional method it is, grpc sends the headers
    first and the request and the half-close later (from a helper thread or a later await): a
    gateway that refuses on the headers alone (nginx's ``return 401``) answers before the
    half-close and then resets the stream (RST_STREAM NO_ERROR), which grpc reports as
    ``INTERNAL: Stream removed`` instead of the refusal; on a busy machine that is most calls.
    On the wire both are the same HTTP/2 POST: Triton's bidirectional handler sees no difference.
    """
    from tritonclient.grpc import service_pb2

    return channel.unary_stream(
        _STREAM_METHOD,
        request_serializer=service_pb2.ModelInferRequest.SerializeToString,
        response_deserializer=service_pb2.ModelStreamInferResponse.FromString,
    )


def _server_exception(message: str, status: str, retry_after: str | None = None) -> Exception:
    from tritonclient.utils import InferenceServerException

    error: Exception = InferenceServerException(msg=message, status=status)
    setattr(error, RETRY_AFTER_ATTR, parse_retry_after(retry_after))
    return error


def _from_rpc_error(exc: Any) -> Exception:
    """grpc's RpcError as tritonclient reports it (status ``StatusCode.X`` + details)."""
    code = exc.code() if callable(getattr(exc, "code", None)) else None
    details = exc.details() if callable(getattr(exc, "details", None)) else str(exc)
    return _server_exception(str(details or exc), str(code) if code is not None else "StatusCode.UNKNOWN")


def _refusal(raw: bytes, status: int, headers: Mapping[str, str]) -> Exception:
    """The error of a generate_stream POST answered with ``status`` other than 200 (body ``raw``;
    ``headers`` looked up by lower-case name).

    A refused answer that is an event stream is the model's first response being an error
    (Triton sets 400 on the stream it starts): the same StreamError a later error event gives.
    Any other is the server's refusal, with its ``Retry-After``.
    """
    content_type = headers.get("content-type", "")
    if status == 400 and "event-stream" in content_type:
        return StreamError(error_text(raw, content_type))
    return _server_exception(error_text(raw, content_type), str(status), headers.get("retry-after"))


class _StreamTransportBase:
    def __init__(
        self, endpoint: Endpoint, *, connect_timeout: float, cacert: str | Path | None, insecure: bool
    ) -> None:
        self.endpoint = endpoint
        self.connect_timeout = connect_timeout
        self.cacert = str(cacert) if cacert is not None else None
        self.insecure = insecure
        self.grpc = endpoint.protocol == "grpc"

    def url(self, model: str, version: str) -> str:
        scheme = "https" if self.endpoint.ssl else "http"
        return f"{scheme}://{self.endpoint.address}{self.endpoint.path_prefix}/{stream_path(model, version)}"

    def _channel_to(self, *, aio: bool) -> Any:
        return grpc_channel(self.endpoint.address, ssl_on=self.endpoint.ssl, cacert=self.cacert, aio=aio)

    def _timeouts(self, first: float | None) -> dict[str, float | None]:
        c = self.connect_timeout
        return {"connect": c, "read": first, "write": c, "pool": c}

    @staticmethod
    def _headers(headers: Headers | None) -> dict[str, str]:
        out = dict(headers or {})
        out.setdefault("Accept", "text/event-stream")
        out.setdefault("Content-Type", "application/json")
        return out


# -- synchronous ------------------------------------------------------------------------------


class SyncGrpcCall:
    """A ModelStreamInfer call read by a helper thread, so waits can time out.

    grpc's blocking iterator has no per-message timeout; the thread hands messages over a queue.
    The request side is closed with the one request (see ``_one_request_stream``): Triton then
    ends the call (status OK) once the request's last response is out.
    """

    def __init__(self, stream: Any, request: Any, metadata: Any) -> None:
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._call = stream(request, metadata=metadata)
        self._index = 0
        self._thread = threading.Thread(target=self._pump, name="tritonkit-grpc-stream", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        import grpc

        try:
            for message in self._call:
                self._queue.put(message)
        except grpc.RpcError as exc:
            self._queue.put(_from_rpc_error(exc))
        except Exception as exc:  # noqa: BLE001 - handed to the reading thread, which maps it
            self._queue.put(exc)
        else:
            self._queue.put(_END)

    def next(self, timeout: float | None) -> StreamResponse | None:
        try:
            item = self._queue.get(timeout=timeout)
        except queue.Empty:
            raise StreamTimeoutError("wait") from None
        if item is _END:
            return None
        if isinstance(item, BaseException):
            raise item
        response = decode_grpc_response(item, index=self._index)
        if response is not None:
            self._index += 1
        return response

    def cancel(self) -> None:
        self._call.cancel()


class SyncSseCall:
    """A generate_stream POST read with httpx.

    httpx applies one read timeout per phase: the response head (which Triton sends with the
    first response) waits ``first``; body reads wait ``gap`` (httpcore reads the timeout mapping
    when the body starts, after we changed it). The total deadline is a timer that shuts the
    socket down, which also tells the server the client is gone.
    """

    def __init__(
        self,
        client: Any,
        url: str,
        body: bytes,
        headers: dict[str, str],
        *,
        timeouts: dict[str, float | None],
        gap: float | None,
        total: float | None,
        info: Any,
        wanted: Any,
    ) -> None:
        import httpx

        self._httpx = httpx
        self._info, self._wanted = info, wanted
        self._index = 0
        self._expired = False
        self._timer: threading.Timer | None = None
        self._response: Any = None
        request = client.build_request(
            "POST", url, content=body, headers=headers, extensions={"timeout": timeouts}
        )
        if total is not None:
            self._timer = threading.Timer(max(0.0, total), self._expire)
            self._timer.daemon = True
            self._timer.start()
        try:
            response = client.send(request, stream=True)
        except httpx.ReadTimeout:  # the head comes with the first response (a connect timeout
            self.cancel()  # is not one: it goes to classify as it is)
            raise StreamTimeoutError("total" if self._expired else "wait") from None
        except BaseException:
            self.cancel()
            raise
        self._response = response
        if response.status_code != 200:
            try:
                raw = response.read()
            finally:
                self.cancel()
            raise _refusal(raw, response.status_code, response.headers)
        timeouts["read"] = gap  # body reads from here on (see the class docstring)
        self._events = SseParser().events(response.iter_lines())

    def _expire(self) -> None:
        self._expired = True
        stream = self._response.extensions.get("network_stream") if self._response is not None else None
        sock = stream.get_extra_info("socket") if stream is not None else None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def next(self, timeout: float | None) -> StreamResponse | None:
        try:
            event = next(self._events, None)
        except self._httpx.TimeoutException:
            raise StreamTimeoutError("total" if self._expired else "wait") from None
        except Exception:
            if self._expired:
                raise StreamTimeoutError("total") from None
            raise
        if event is None:
            if self._expired:
                raise StreamTimeoutError("total")
            return None
        response = decode_sse_data(event.data, self._info, index=self._index, wanted=self._wanted)
        self._index += 1
        return response

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._response is not None:
            self._response.close()  # an unfinished body: httpcore drops the connection


class SyncStreamTransport(_StreamTransportBase):
    """One gRPC channel or one httpx client, shared by every stream of a TritonClient (both are
    thread-safe and multiplex/pool connections)."""

    def __init__(
        self, endpoint: Endpoint, *, connect_timeout: float, cacert: str | Path | None, insecure: bool
    ) -> None:
        super().__init__(endpoint, connect_timeout=connect_timeout, cacert=cacert, insecure=insecure)
        self._lock = threading.Lock()
        self._channel: Any = None
        self._stub: Any = None
        self._http: Any = None

    def _grpc_stub(self) -> Any:
        with self._lock:
            if self._stub is None:
                self._channel = self._channel_to(aio=False)
                self._stub = _one_request_stream(self._channel)
            return self._stub

    def _http_client(self) -> Any:
        with self._lock:
            if self._http is None:
                import httpx

                self._http = httpx.Client(verify=httpx_verify(self.cacert, insecure=self.insecure))
            return self._http

    def open_grpc(self, request: Any, headers: Headers | None) -> SyncGrpcCall:
        metadata = _grpc_headers(headers)
        return SyncGrpcCall(self._grpc_stub(), request, list(metadata.items()) if metadata else None)

    def open_http(
        self,
        plan: StreamPlan,
        headers: Headers | None,
        *,
        first: float | None,
        gap: float | None,
        total: float | None,
    ) -> SyncSseCall:
        """POST ``plan``'s generate_stream body; ``first``/``gap``/``total``: its waits now."""
        return SyncSseCall(
            self._http_client(),
            self.url(plan.model, plan.version),
            plan.payload,
            self._headers(headers),
            timeouts=self._timeouts(first),
            gap=gap,
            total=total,
            info=plan.info,
            wanted=plan.wanted,
        )

    def close(self) -> None:
        with self._lock:
            channel, self._channel, self._stub = self._channel, None, None
            http, self._http = self._http, None
        if channel is not None:
            channel.close()
        if http is not None:
            http.close()


# -- asyncio --------------------------------------------------------------------------------


class AsyncGrpcCall:
    """A grpc.aio ModelStreamInfer call: one request sent with the headers (see
    ``_one_request_stream``), then read.

    The stream's total timeout is the call's gRPC deadline (``deadline``, a ``time.monotonic``
    instant): grpc ends the call there by itself, so a read whose wait is the rest of the total
    is a plain read, with no timer of its own. Only a shorter wait (a first-response or gap
    timeout below what is left) is timed per read.
    """

    def __init__(self, call: Any, deadline: float | None = None) -> None:
        self._call = call
        self._index = 0
        self._deadline = deadline

    @classmethod
    async def open(
        cls, stub: Any, request: Any, metadata: Any, deadline: float | None = None
    ) -> AsyncGrpcCall:
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        return cls(
            stub(request, metadata=metadata, timeout=timeout), deadline
        )  # errors come with the first read

    async def next(self, timeout: float | None) -> StreamResponse | None:
        import grpc

        try:
            if timeout is None or (
                self._deadline is not None and time.monotonic() + timeout >= self._deadline - _DEADLINE_SLACK
            ):
                message = await self._call.read()
            else:
                message = await within(self._call.read(), timeout)
        except asyncio.TimeoutError:
            raise StreamTimeoutError("wait") from None
        except grpc.RpcError as exc:
            if self._deadline is not None and exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise StreamTimeoutError("total") from None
            raise _from_rpc_error(exc) from exc
        if message is grpc.aio.EOF:
            return None
        response = decode_grpc_response(message, index=self._index)
        if response is not None:
            self._index += 1
        return response

    async def cancel(self) -> None:
        self._call.cancel()


class AsyncStreamTransport(_StreamTransportBase):
    """One grpc.aio channel or one pool of HTTP/1.1 connections (``_stream_h1``) per
    AsyncTritonClient (made on first use, inside the running loop)."""

    def __init__(
        self, endpoint: Endpoint, *, connect_timeout: float, cacert: str | Path | None, insecure: bool
    ) -> None:
        super().__init__(endpoint, connect_timeout=connect_timeout, cacert=cacert, insecure=insecure)
        self._channel: Any = None
        self._stub: Any = None
        self._pool: H1Pool | None = None

    def _grpc_stub(self) -> Any:
        if self._stub is None:
            self._channel = self._channel_to(aio=True)
            self._stub = _one_request_stream(self._channel)
        return self._stub

    def _http_pool(self) -> H1Pool:
        if self._pool is None:
            e = self.endpoint
            tls = tls_context(self.cacert, insecure=self.insecure) if e.ssl else None
            self._pool = H1Pool(
                e.host, e.port, authority=e.address, tls=tls, connect_timeout=self.connect_timeout
            )
        return self._pool

    async def open_grpc(
        self, request: Any, headers: Headers | None, *, deadline: float | None = None
    ) -> AsyncGrpcCall:
        """Open the call; ``deadline``: when the whole stream must be over (``time.monotonic``)."""
        metadata = _grpc_headers(headers)
        return await AsyncGrpcCall.open(
            self._grpc_stub(), request, tuple(metadata.items()) if metadata else None, deadline
        )

    async def open_http(self, plan: StreamPlan, headers: Headers | None, *, first: float | None) -> H1SseCall:
        """POST ``plan``'s generate_stream body; ``first``: the wait for the response head."""
        return await H1SseCall.open(
            self._http_pool(),
            f"{self.endpoint.path_prefix}/{stream_path(plan.model, plan.version)}",
            plan.payload,
            self._headers(headers),
            first=first,
            info=plan.info,
            wanted=plan.wanted,
            refusal=_refusal,
        )

    async def close(self) -> None:
        channel, self._channel, self._stub = self._channel, None, None
        pool, self._pool = self._pool, None
        if channel is not None:
            await channel.close()
        if pool is not None:
            pool.close()


__all__ = [
    "AsyncStreamTransport",
    "StreamError",
    "StreamTimeoutError",
    "SyncStreamTransport",
]
