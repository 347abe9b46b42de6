"""The async stream client's HTTP/1.1 reader (``_stream_h1``) against a real socket: a small
asyncio server on 127.0.0.1 that answers a generate_stream POST the way a test needs (events cut
anywhere, several in one write, CRLF lines, refusals, a connection dropped mid-answer).

Triton itself is read by tests/integration/test_client_stream.py and the OpenAI front's tests.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from tritonclient.utils import InferenceServerException

from tritonkit.client._inputs import ModelInfo, TensorInfo
from tritonkit.client._stream import StreamError, StreamTimeoutError
from tritonkit.client._stream_h1 import H1Pool, H1SseCall
from tritonkit.client._stream_transport import _refusal

INFO = ModelInfo(
    name="gen",
    version="",
    max_batch_size=0,
    inputs=(TensorInfo("PROMPT", "BYTES", (1,)),),
    outputs=(TensorInfo("TEXT", "BYTES", (-1,)),),
    decoupled=True,
)
Answer = Callable[[asyncio.StreamWriter, int], Awaitable[None]]


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def _event(text: str) -> bytes:
    return b"data: " + json.dumps({"TEXT": text, "model_name": "gen"}).encode() + b"\n\n"


HEAD_200 = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
END = b"0\r\n\r\n"


class Server:
    """Counts connections and requests; ``answer(writer, n)`` writes the n-th request's answer."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.connections = 0
        self.requests = 0
        self.closed = asyncio.Event()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                await reader.readexactly(length)
                self.requests += 1
                await self.answer(writer, self.requests)
        except (asyncio.IncompleteReadError, ConnectionError):
            self.closed.set()
        finally:
            writer.close()


async def _with_server(answer: Answer, body: Callable[[H1Pool, Server], Awaitable[Any]]) -> Any:
    server = Server(answer)
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    pool = H1Pool("127.0.0.1", port, authority=f"127.0.0.1:{port}", tls=None, connect_timeout=5)
    try:
        return await body(pool, server)
    finally:
        pool.close()
        listener.close()
        await listener.wait_closed()


async def _open(pool: H1Pool, first: float | None = 5) -> H1SseCall:
    headers = {"Content-Type": "application/json"}
    return await H1SseCall.open(
        pool, "/v2/models/gen/generate_stream", b"{}", headers, first=first, info=INFO, wanted=None,
        refusal=_refusal,
    )  # fmt: skip


async def _texts(call: H1SseCall) -> list[str]:
    texts = []
    while (r := await call.next(5)) is not None:
        texts.append(r.text("TEXT"))
    return texts


def test_events_cut_anywhere_or_sharing_a_write_come_one_by_one_and_the_connection_is_reused() -> None:
    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        body = _event(f"a{n}") + _event("b") + b': a comment\r\ndata: {"TEXT":\r\ndata: "c"}\r\n\r\n'
        writer.write(HEAD_200 + _chunk(body[:9]))  # the head with the start of the first event
        await writer.drain()
        await asyncio.sleep(0.01)
        writer.write(_chunk(body[9:]) + END)  # the rest, two events and a half... in one write

    async def body(pool: H1Pool, server: Server) -> tuple[list[str], list[str], int]:
        first = await _texts(await _open(pool))
        second = await _texts(await _open(pool))
        return first, second, server.connections

    first, second, connections = asyncio.run(_with_server(answer, body))
    # a multi-line data event with CRLF line ends and a comment line is read as the standard says
    assert first == ["a1", "b", "c"] and second == ["a2", "b", "c"]
    assert connections == 1  # keep-alive: the second stream took the first one's connection


@pytest.mark.parametrize(
    ("head", "payload", "kind", "words"),
    [
        (b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 2\r\n", b'{"error":"busy"}', "503", "busy"),
        (
            b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/event-stream\r\n",
            b'data: {"error":"no"}\n\n',
            "",
            "no",
        ),
    ],
)
def test_a_refusal_is_the_servers_status_or_the_first_responses_error(
    head: bytes, payload: bytes, kind: str, words: str
) -> None:
    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(head + f"Content-Length: {len(payload)}\r\n\r\n".encode() + payload)

    async def body(pool: H1Pool, server: Server) -> BaseException:
        with pytest.raises(Exception) as info:
            await _open(pool)
        return info.value

    error = asyncio.run(_with_server(answer, body))
    if kind:
        assert isinstance(error, InferenceServerException) and error.status() == kind
        assert words in error.message() and getattr(error, "tritonkit_retry_after", None) == 2.0
    else:
        assert isinstance(error, StreamError) and str(error) == words


def test_a_connection_dropped_mid_answer_is_a_connection_error_after_the_pieces_before() -> None:
    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(HEAD_200 + _chunk(_event("a")))
        await writer.drain()
        writer.close()

    async def body(pool: H1Pool, server: Server) -> tuple[str, BaseException]:
        call = await _open(pool)
        first = await call.next(5)
        assert first is not None
        with pytest.raises(ConnectionError) as info:
            await call.next(5)
        return first.text("TEXT"), info.value

    text, error = asyncio.run(_with_server(answer, body))
    assert text == "a" and "closed the connection" in str(error)


def test_a_late_piece_times_out_and_cancel_closes_the_connection_the_server_sees_it() -> None:
    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(HEAD_200 + _chunk(_event("a")))  # then nothing more

    async def body(pool: H1Pool, server: Server) -> bool:
        call = await _open(pool)
        assert await call.next(5) is not None
        with pytest.raises(StreamTimeoutError):
            await call.next(0.05)
        await call.cancel()  # what tells Triton to cancel the request
        await asyncio.wait_for(server.closed.wait(), 5)
        return server.closed.is_set()

    assert asyncio.run(_with_server(answer, body))


def test_a_pooled_connection_the_server_closed_is_replaced_before_the_request() -> None:
    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(HEAD_200 + _chunk(_event(f"a{n}")) + END)
        await writer.drain()
        writer.close()  # a server that ends keep-alive connections after each answer

    async def body(pool: H1Pool, server: Server) -> tuple[list[str], list[str], int]:
        first = await _texts(await _open(pool))
        await asyncio.sleep(0.05)  # the close has come: the idle connection is gone
        second = await _texts(await _open(pool))
        return first, second, server.connections

    first, second, connections = asyncio.run(_with_server(answer, body))
    assert first == ["a1"] and second == ["a2"] and connections == 2
