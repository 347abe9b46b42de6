"""Triton's generate_stream over HTTP/1.1 on asyncio: the async stream client's HTTP path.

One keep-alive connection per stream in flight, pooled per client: a POST is written, httptools
(C) parses the response head and the chunked body as it arrives, and the body is cut into
server-sent events (several often come in one read) that :meth:`H1SseCall.next` hands out one at
a time, decoded only when asked for. Reading a token this way costs a Python process 22-50 µs of
CPU at 16-128 streams, against 80-175 µs for grpc.aio and 150-260 µs (up to 1,300 at 128) for
httpx's ``aiter_lines`` (``benchmarks/transport_floor.py``, issue #40): it is the OpenAI front's
hot path.

Cancelling closes the connection, which Triton 2.51 turns into a cancellation of the request (its
HTTP server frees the request when the connection goes, and the model sees ``is_cancelled()``;
tests/integration/test_client_stream.py). Errors come out as ``_stream_transport`` documents:
a refused POST as tritonclient's ``InferenceServerException`` (status + message), an error event
as ``StreamError``, a late response as ``StreamTimeoutError``, a broken connection as
``ConnectionError``.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from tritonkit._timeouts import within
from tritonkit.client._stream import StreamResponse, StreamTimeoutError, decode_sse_data

__all__ = ["H1Pool", "H1SseCall"]

#: idle keep-alive connections a pool keeps (more are closed when their stream ends)
MAX_IDLE = 512


class _Exchange(asyncio.Protocol):
    """One connection; one request/response at a time on it (HTTP/1.1, no pipelining)."""

    def __init__(self) -> None:
        import httptools

        self._parser_error = httptools.HttpParserError
        self._new_parser: Callable[[], Any] = lambda: httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.lost = False
        self._waiter: asyncio.Future[None] | None = None
        #: called (in the event loop's callback, no task woken) each time more has arrived or the
        #: connection ended: what reads :attr:`events` as they come (the OpenAI front's relay)
        self.sink: Callable[[], None] | None = None
        self.reset()

    def reset(self) -> None:
        self.sink = None
        self.parser = self._new_parser()
        self.status = 0
        self.headers: dict[str, str] = {}
        self.events: deque[bytes] = deque()
        self.raw = bytearray()  # the body of a refusal (status other than 200)
        self.head = self.complete = self.keep_alive = False
        self.error: Exception | None = None
        self._rest = b""

    # -- asyncio.Protocol ------------------------------------------------------------------
    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except self._parser_error as exc:
            self.error = ConnectionError(f"the server's HTTP answer could not be parsed: {exc}")
            self.close()
        self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if not self.complete and self.error is None:
            self.error = ConnectionResetError("the server closed the connection before the answer ended")
        self._wake()

    # -- httptools callbacks ---------------------------------------------------------------
    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        self.head = True

    def on_body(self, body: bytes) -> None:
        if self.status != 200:
            self.raw += body
            return
        data = self._rest + body if self._rest else body
        if b"\r" in data:  # SSE allows CRLF and CR line ends; Triton writes LF
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        *blocks, self._rest = data.split(b"\n\n")
        self.events.extend(blocks)

    def on_message_complete(self) -> None:
        self.keep_alive = self.parser.should_keep_alive()  # read now: the parser resets after
        self.complete = True

    # -- the call's side -------------------------------------------------------------------
    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        sink = self.sink
        if sink is not None:
            sink()

    async def wait(self, timeout: float | None) -> None:
        """Until more has arrived (or the connection ended); StreamTimeoutError after ``timeout``."""
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer = None if timeout is None else loop.call_later(max(0.0, timeout), _expire, waiter)
        try:
            await waiter
        finally:
            if timer is not None:
                timer.cancel()

    def reusable(self) -> bool:
        return self.complete and self.keep_alive and not self.lost and self.error is None

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(StreamTimeoutError("wait"))


class H1Pool:
    """Keep-alive connections to one HTTP endpoint (``tls``: an SSLContext for https)."""

    def __init__(
        self, host: str, port: int, *, authority: str, tls: ssl.SSLContext | None, connect_timeout: float
    ) -> None:
        self.host, self.port, self.tls = host, port, tls
        self.authority = authority  # the Host header: host:port, an IPv6 host in brackets
        self.connect_timeout = connect_timeout
        self._idle: list[_Exchange] = []

    async def take(self) -> tuple[_Exchange, bool]:
        """A connection, and whether it was idle in the pool (the server may have closed it)."""
        while self._idle:
            conn = self._idle.pop()
            if not conn.lost and conn.transport is not None and not conn.transport.is_closing():
                conn.reset()
                return conn, True
        loop = asyncio.get_running_loop()
        _, conn = await within(
            loop.create_connection(_Exchange, self.host, self.port, ssl=self.tls), self.connect_timeout
        )
        return conn, False

    def give_back(self, conn: _Exchange) -> None:
        if conn.reusable() and len(self._idle) < MAX_IDLE:
            self._idle.append(conn)
        else:
            conn.close()

    def close(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


class H1SseCall:
    """One generate_stream POST on a pooled connection, read event by event."""

    def __init__(self, pool: H1Pool, conn: _Exchange, info: Any, wanted: Any) -> None:
        self._pool, self._conn = pool, conn
        self._info, self._wanted = info, wanted
        self._index = 0
        self._done = False

    @classmethod
    async def open(
        cls,
        pool: H1Pool,
        target: str,
        body: bytes,
        headers: Mapping[str, str],
        *,
        first: float | None,
        info: Any,
        wanted: Any,
        refusal: Callable[[bytes, int, Mapping[str, str]], Exception],
    ) -> H1SseCall:
        """Send the POST (``target``: the path) and wait ``first`` for the head; ``refusal`` makes
        the error of an answer other than 200 from its body, status and headers."""
        head = f"POST {target} HTTP/1.1\r\nHost: {pool.authority}\r\nContent-Length: {len(body)}\r\n"
        request = (head + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n").encode() + body
        for attempt in (1, 2):  # a pooled connection the server closed meanwhile: once more
            conn, pooled = await pool.take()
            call = cls(pool, conn, info, wanted)
            assert conn.transport is not None
            conn.transport.write(request)
            try:
                while not conn.head:
                    if conn.error is not None:
                        raise conn.error
                    await conn.wait(first)
            except ConnectionError:
                call._close()
                if pooled and not conn.head and attempt == 1:
                    continue
                raise
            except BaseException:
                call._close()
                raise
            break
        if conn.status != 200:
            try:
                while not conn.complete and conn.error is None:
                    await conn.wait(first)
            finally:
                call._close()
            raise refusal(bytes(conn.raw), conn.status, conn.headers)
        return call

    @property
    def info(self) -> Any:
        """The model's ModelInfo (its outputs by name: ``output_map``), None when not known."""
        return self._info

    @property
    def wanted(self) -> Any:
        """The outputs kept of each event (None: every output of the model)."""
        return self._wanted

    @property
    def connection(self) -> _Exchange:
        """The connection the answer comes on (its :attr:`_Exchange.events` not yet handed out,
        its ``sink``)."""
        return self._conn

    async def next(self, timeout: float | None) -> StreamResponse | None:
        conn = self._conn
        while True:
            events = conn.events
            while events:
                block = events.popleft()
                data = _event_data(block)
                if data is None:
                    continue
                response = decode_sse_data(data, self._info, index=self._index, wanted=self._wanted)
                self._index += 1
                return response
            if conn.complete:
                self._finish()
                return None
            if conn.error is not None:
                raise conn.error
            await conn.wait(timeout)

    async def cancel(self) -> None:
        if not self._done:
            self._close()  # an unfinished answer: closing the connection cancels the request

    def _finish(self) -> None:
        if not self._done:
            self._done = True
            self._pool.give_back(self._conn)

    def _close(self) -> None:
        self._done = True
        self._conn.close()


def _event_data(block: bytes) -> bytes | str | None:
    """The data of one server-sent event (the lines of one block), None when it has none."""
    if block.startswith(b"data: ") and b"\n" not in block:
        return block[6:]  # what Triton writes: one data line
    from tritonkit.client._stream import SseParser

    parser = SseParser()
    for line in block.decode("utf-8", "replace").split("\n"):
        parser.feed(line)
    event = parser.feed("")
    return event.data if event is not None else None
