"""HTTP ``generate_stream`` with every response stamped by the kernel when it arrived.

Why: a Python client on a busy machine gets round to a response milliseconds after it came in
(measured: TTFT read 9.4x too high at concurrency 4 with the box's cores taken by other work,
where perf_analyzer read it exactly). The kernel stamps each packet as it is received
(``SO_TIMESTAMPNS``: the software receive time, on ``CLOCK_REALTIME``) and ``recvmsg`` hands the
stamp over with the bytes, however late the reader is: that stamp, not the moment Python reads,
is the response's time.

A TCP read reports the stamp of the last packet it took bytes from, so reads never go past the
end of the current chunk of the chunked body (Triton writes one server-sent event per chunk):
the read that completes a chunk carries the stamp of the packet that held its last byte.
The difference between a stamp and the moment the reader saw it is the client's own delay,
reported per request (how busy the client was), never added to a figure.

Plain HTTP only (TLS hides the packets: ``https`` streams through httpx and are stamped on
read). Linux only (``SO_TIMESTAMPNS``); elsewhere the reads are stamped when they happen.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
import time
from collections.abc import Callable
from typing import Any

from tritonkit.errors import StreamError

#: Linux's SO_TIMESTAMPNS (== SCM_TIMESTAMPNS); Python names it only on some builds
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
_TIMESPEC = struct.Struct("@qq")
_ANC = socket.CMSG_SPACE(_TIMESPEC.size)
_HEAD_READ = 4096
_SIZE_READ = 16  # a chunk-size line ("1a3\r\n") and the first bytes of its chunk


#: The one stream error (``kind`` names it); the old name stays importable.
StampedStreamError = StreamError


class Clock:
    """Maps the kernel's CLOCK_REALTIME stamps onto time.monotonic_ns (re-read every second)."""

    def __init__(self) -> None:
        self._offset = 0
        self._read_at = -(10**18)

    def offset(self) -> int:
        now = time.monotonic_ns()
        if now - self._read_at > 1_000_000_000:
            best = None
            for _ in range(5):  # the tightest bracket: a preemption between the reads would skew it
                a = time.monotonic_ns()
                r = time.time_ns()
                b = time.monotonic_ns()
                if best is None or b - a < best[0]:
                    best = (b - a, r - (a + b) // 2)
            assert best is not None
            self._offset = best[1]
            self._read_at = now
        return self._offset


class _Conn:
    """One keep-alive connection; one stream at a time."""

    def __init__(self, sock: socket.socket, stamped: bool) -> None:
        self.sock = sock
        self.stamped = stamped
        self.broken = False


class StampedHttpStreams:
    """A pool of keep-alive sockets streaming ``generate_stream`` requests with kernel stamps."""

    def __init__(self, *, host: str, port: int, timeout_s: float, limit: int) -> None:
        self.host = host
        self.port = port
        self.timeout_s = timeout_s
        self._idle: list[_Conn] = []
        self._limit = limit
        self.clock = Clock()

    async def _connect(self) -> _Conn:
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
        family, kind, proto, _, addr = infos[0]
        sock = socket.socket(family, kind, proto)
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        stamped = True
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        except OSError:
            stamped = False
        try:
            await loop.sock_connect(sock, addr)
        except BaseException:
            sock.close()
            raise
        return _Conn(sock, stamped)

    def close(self) -> None:
        for conn in self._idle:
            conn.sock.close()
        self._idle = []

    async def stream(
        self,
        head: bytes,
        body: bytes,
        on_event: Callable[[int, int, dict[str, Any]], None],
    ) -> tuple[int, int]:
        """Send one request; ``on_event(arrival_ns, seen_ns, event)`` for each data event.

        Returns (send_ns, end_ns): when the request left and when the end of the body arrived
        (monotonic ns; arrivals are kernel stamps mapped onto the monotonic clock).
        """
        conn = self._idle.pop() if self._idle else await self._connect()
        try:
            result = await self._exchange(conn, head, body, on_event)
        except BaseException:
            conn.broken = True
            conn.sock.close()
            raise
        if conn.broken or len(self._idle) >= self._limit:
            conn.sock.close()
        else:
            self._idle.append(conn)
        return result

    async def _exchange(
        self, conn: _Conn, head: bytes, body: bytes, on_event: Callable[[int, int, dict[str, Any]], None]
    ) -> tuple[int, int]:
        loop = asyncio.get_running_loop()
        offset = self.clock.offset()
        send_ns = time.monotonic_ns()
        await loop.sock_sendall(conn.sock, head + body)
        reader = _Reader(conn, loop, offset)
        status, chunked, length, close = await reader.head()
        if status != 200:
            text = await reader.rest(length, chunked)
            conn.broken = True
            raise StreamError(text[:200].decode("utf-8", errors="replace"), kind=f"http {status}")
        if close:
            conn.broken = True
        if not chunked:  # an answer without a chunked body: one event or an error
            data, stamp = await reader.exactly(length) if length >= 0 else (b"", reader.last)
            for event in _events(data):
                on_event(stamp, time.monotonic_ns(), event)
            return send_ns, stamp
        while True:
            size = await reader.chunk_size()
            if size == 0:
                await reader.exactly(2)  # the empty line after the last chunk (no trailers sent)
                return send_ns, reader.last
            data, stamp = await reader.exactly(size + 2)
            seen = time.monotonic_ns()
            for event in _events(data[:-2]):
                on_event(stamp, seen, event)


def stream_head(*, host: str, port: int, uri: str, headers: dict[str, str], length: int) -> bytes:
    """The request line and headers of one generate_stream POST of ``length`` JSON bytes."""
    skip = ("host", "content-length", "content-type", "accept")
    lines = [
        f"POST {uri} HTTP/1.1",
        f"Host: {host}:{port}",
        "Content-Type: application/json",
        "Accept: text/event-stream",
        f"Content-Length: {length}",
    ]
    lines += [f"{k}: {v}" for k, v in headers.items() if k.lower() not in skip]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _events(data: bytes) -> list[dict[str, Any]]:
    out = []
    for line in data.split(b"\n"):
        if not line.startswith(b"data:") or line[5:].strip() == b"[DONE]":
            continue  # [DONE]: the end marker of an OpenAI stream, not an event
        try:
            event = json.loads(line[5:])
        except ValueError as exc:
            raise StreamError(line[:200].decode("utf-8", "replace"), kind="http bad event") from exc
        if isinstance(event, dict) and "error" in event:
            raise StreamError(str(event["error"])[:200], kind="http stream error")
        out.append(event if isinstance(event, dict) else {"value": event})
    return out


class _Reader:
    """Reads one response, never past the end of the current chunk (see the module docstring)."""

    def __init__(self, conn: _Conn, loop: asyncio.AbstractEventLoop, offset: int) -> None:
        self.conn = conn
        self.loop = loop
        self.offset = offset
        self.buf = bytearray()
        self.stamp = 0  # arrival (monotonic ns) of the newest bytes in buf
        self.last = 0

    async def _read(self, n: int) -> None:
        sock = self.conn.sock
        while True:
            try:
                data, anc, _, _ = sock.recvmsg(n, _ANC)
                break
            except (BlockingIOError, InterruptedError):
                await self._readable()
        if not data:
            raise ConnectionResetError("connection closed by the server")
        stamp = -1
        for level, kind, value in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(value) >= _TIMESPEC.size:
                sec, nsec = _TIMESPEC.unpack_from(value)
                stamp = sec * 1_000_000_000 + nsec - self.offset
        if stamp < 0:  # no stamp (not Linux, or the kernel did not give one): now is the best
            stamp = time.monotonic_ns()
            self.conn.stamped = False
        self.buf += data
        self.stamp = self.last = stamp

    async def _readable(self) -> None:
        fut: asyncio.Future[None] = self.loop.create_future()
        fd = self.conn.sock.fileno()

        def ready() -> None:
            if not fut.done():
                fut.set_result(None)

        self.loop.add_reader(fd, ready)
        try:
            await fut
        finally:
            self.loop.remove_reader(fd)

    async def head(self) -> tuple[int, bool, int, bool]:
        while (end := self.buf.find(b"\r\n\r\n")) < 0:
            # headers come before any chunk; the bytes of a chunk read with them keep this stamp
            await self._read(_HEAD_READ)
        lines = bytes(self.buf[:end]).decode("latin-1").split("\r\n")
        del self.buf[: end + 4]
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/"):
            raise ConnectionError(f"not an HTTP response: {lines[0][:60]!r}")
        status, chunked, length, close = int(parts[1]), False, -1, parts[0] == "HTTP/1.0"
        for line in lines[1:]:
            name, _, value = line.partition(":")
            key = name.strip().lower()
            if key == "content-length":
                length = int(value.strip())
            elif key == "transfer-encoding" and "chunked" in value.lower():
                chunked = True
            elif key == "connection":
                close = value.strip().lower() == "close"
        return status, chunked, length, close

    async def chunk_size(self) -> int:
        while (end := self.buf.find(b"\r\n")) < 0:
            await self._read(_SIZE_READ)
        line = bytes(self.buf[:end]).split(b";", 1)[0].strip()
        del self.buf[: end + 2]
        try:
            return int(line, 16)
        except ValueError:
            raise ConnectionError(f"bad chunk size {line[:20]!r}") from None

    async def exactly(self, n: int) -> tuple[bytes, int]:
        """``n`` bytes and the arrival of the packet that held the last of them."""
        while len(self.buf) < n:
            await self._read(n - len(self.buf))
        data = bytes(self.buf[:n])
        del self.buf[:n]
        return data, self.stamp

    async def rest(self, length: int, chunked: bool) -> bytes:
        with contextlib.suppress(Exception):
            if chunked:
                parts = []
                while (size := await self.chunk_size()) > 0:
                    parts.append((await self.exactly(size + 2))[0][:-2])
                return b"".join(parts)
            if length >= 0:
                return (await self.exactly(length))[0]
        return bytes(self.buf)
