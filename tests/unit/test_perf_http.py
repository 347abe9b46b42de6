"""The benchmark's HTTP/1.1 transport, against a small real asyncio HTTP server.

The server here is a scripted socket server (not Triton), so responses the local tritonserver
never sends (chunked bodies, Connection: close, stalls) can be exercised; the transport runs
against the real tritonserver in tests/integration/test_perf_*.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from tritonkit.perf._http import HttpPool, HttpStatusError, request_head
from tritonkit.perf._target import error_kind

Handler = Callable[[bytes], Awaitable[bytes | None]]


class _Server:
    """A keep-alive server answering each request with handler(request) (None: stall)."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.tasks: set[asyncio.Task[None]] = set()
        self.server: asyncio.Server | None = None
        self.port = 0

    async def __aenter__(self) -> _Server:
        self.server = await asyncio.start_server(self._on_client, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await asyncio.sleep(0.05)  # let handlers see the client's close
        for task in self.tasks:
            task.cancel()
        if self.tasks:
            await asyncio.wait(self.tasks, timeout=2)

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self.tasks.add(task)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                body = await reader.readexactly(length)
                answer = await self.handler(head + body)
                if answer is None:
                    await asyncio.sleep(10)
                    return
                writer.write(answer)
                await writer.drain()
                if b"connection: close" in answer.lower():
                    return
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            return  # a finished handler, not a cancelled one (asyncio's stream callback wants that)
        finally:
            writer.close()


def _response(status: int, body: bytes, *extra: str) -> bytes:
    head = [
        f"HTTP/1.1 {status} X",
        "Inference-Header-Content-Length: 2",
        f"Content-Length: {len(body)}",
        *extra,
    ]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


async def _post(port: int, pool: HttpPool, body: bytes = b"{}") -> None:
    head = request_head(
        host="127.0.0.1", port=port, uri="/v2/models/m/infer", headers={"X-K": "v"}, length=len(body)
    )
    await pool.post(head, body)


async def test_http_pool_reuses_one_connection_when_responses_have_content_length() -> None:
    seen: list[bytes] = []

    async def handler(req: bytes) -> bytes:
        seen.append(req)
        return _response(200, b"x" * 5000)

    async with _Server(handler) as srv:
        pool = HttpPool(host="127.0.0.1", port=srv.port, ssl_context=None, timeout_s=5)
        for _ in range(5):
            await _post(srv.port, pool, b'{"a": 1}')
        pool.close()
    assert len(seen) == 5 and srv.connections == 1
    assert seen[0].startswith(b"POST /v2/models/m/infer HTTP/1.1\r\n")
    assert b"\r\nX-K: v\r\n" in seen[0] and seen[0].endswith(b'{"a": 1}')


async def test_http_pool_reads_chunked_bodies_and_reconnects_after_connection_close() -> None:
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n3;x=y\r\nefg\r\n0\r\n\r\n"
    answers = [chunked, _response(200, b"ok", "Connection: close"), _response(200, b"ok")]

    async def handler(req: bytes) -> bytes:
        return answers.pop(0)

    async with _Server(handler) as srv:
        pool = HttpPool(host="127.0.0.1", port=srv.port, ssl_context=None, timeout_s=5)
        for _ in range(3):
            await _post(srv.port, pool)
        pool.close()
    assert answers == [] and srv.connections == 2


async def test_http_pool_raises_status_error_named_by_kind_when_server_refuses() -> None:
    async def handler(req: bytes) -> bytes:
        return _response(503, b'{"error": "busy"}')

    async with _Server(handler) as srv:
        pool = HttpPool(host="127.0.0.1", port=srv.port, ssl_context=None, timeout_s=5)
        with pytest.raises(HttpStatusError) as info:
            await _post(srv.port, pool)
        pool.close()
    assert info.value.status == 503
    assert error_kind(info.value, "http") == "http 503"


async def test_http_pool_raises_timeout_when_server_stalls() -> None:
    async def handler(req: bytes) -> None:
        return None

    async with _Server(handler) as srv:
        pool = HttpPool(host="127.0.0.1", port=srv.port, ssl_context=None, timeout_s=0.2)
        with pytest.raises(TimeoutError) as info:
            await _post(srv.port, pool)
        pool.close()
    assert error_kind(info.value, "http") == "timeout"


async def _never(req: bytes) -> bytes | None:
    return None


async def test_http_pool_raises_connection_error_when_nothing_listens() -> None:
    async with _Server(_never) as srv:
        port = srv.port
    assert srv.server is not None
    await srv.server.wait_closed()
    pool = HttpPool(host="127.0.0.1", port=port, ssl_context=None, timeout_s=2)
    with pytest.raises(OSError) as info:
        await _post(port, pool)
    assert error_kind(info.value, "http") == "connection"
