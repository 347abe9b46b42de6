"""Kernel receive stamps: a late reader still gets each response's arrival time."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import threading
import time
from typing import Any

import pytest

from tritonkit.perf._kstamp import StampedHttpStreams, StampedStreamError, stream_head
from tritonkit.perf.stream_metrics import shared_stamps

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="SO_TIMESTAMPNS is Linux's")

MS = 1_000_000


class _SseServer:
    """A real socket server answering one chunked text/event-stream per request, one event per
    chunk every ``gap_s``, noting when it wrote each (monotonic ns, the client's clock too)."""

    def __init__(self, *, events: int = 3, gap_s: float = 0.03, status: int = 200) -> None:
        self.events, self.gap_s, self.status = events, gap_s, status
        self.sent: list[int] = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with conn:
            buf = b""
            while b"\r\n\r\n" not in buf:
                buf += conn.recv(4096)
            head, _, body = buf.partition(b"\r\n\r\n")
            length = int(
                next(
                    ln.split(b":")[1]
                    for ln in head.split(b"\r\n")
                    if ln.lower().startswith(b"content-length")
                )
            )
            while len(body) < length:
                body += conn.recv(4096)
            if self.status != 200:
                msg = b'{"error":"bad"}'
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\n\r\n%s" % (len(msg), msg))
                return
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
            )
            for i in range(self.events):
                time.sleep(self.gap_s)
                event = (
                    b"data: " + json.dumps({"TOKEN": f"tok{i}", "num_output_tokens": 2}).encode() + b"\n\n"
                )
                self.sent.append(time.monotonic_ns())
                conn.sendall(b"%x\r\n%s\r\n" % (len(event), event))
            time.sleep(self.gap_s)
            self.sent.append(time.monotonic_ns())
            conn.sendall(b"0\r\n\r\n")
            time.sleep(0.05)

    def close(self) -> None:
        self.sock.close()
        self.thread.join(timeout=5)


def _run(server: _SseServer, *, block_s: float) -> tuple[list[tuple[int, int, dict[str, Any]]], int, int]:
    events: list[tuple[int, int, dict[str, Any]]] = []

    def on_event(arrival: int, seen: int, event: dict[str, Any]) -> None:
        events.append((arrival, seen, event))
        if block_s and len(events) == 1:
            time.sleep(block_s)  # the client's event loop is busy while the next responses arrive

    async def main() -> tuple[int, int]:
        pool = StampedHttpStreams(host="127.0.0.1", port=server.port, timeout_s=5, limit=4)
        body = b'{"PROMPT": "hi"}'
        head = stream_head(
            host="127.0.0.1",
            port=server.port,
            uri="/v2/models/m/generate_stream",
            headers={},
            length=len(body),
        )
        try:
            return await pool.stream(head, body, on_event)
        finally:
            pool.close()

    send_ns, end_ns = asyncio.run(main())
    return events, send_ns, end_ns


def test_a_stamp_is_the_arrival_not_the_read_when_the_reader_is_late_by_less_than_a_gap() -> None:
    server = _SseServer(events=3, gap_s=0.06)
    try:
        events, send_ns, end_ns = _run(server, block_s=0.03)  # late, but back before the next one
    finally:
        server.close()
    assert [e["TOKEN"] for _, _, e in events] == ["tok0", "tok1", "tok2"]
    assert len({a for a, _, _ in events}) == 3  # no packets merged
    # each stamp is its packet's arrival: after the server wrote it, before it wrote the next and
    # no later than the read (asserted by order: a loaded box delays, it does not reorder)
    _stamped_between_writes(events, server.sent)
    assert send_ns < events[0][0] and server.sent[-1] <= end_ns


def test_packets_merged_behind_a_late_reader_share_the_newest_stamp_and_are_detected() -> None:
    """What the kernel does (tcp_try_coalesce): responses queued behind a reader that is late by
    more than the gap between them are merged, and the merged packet keeps the newest stamp."""
    server = _SseServer(events=3, gap_s=0.03)
    try:
        events, _, end_ns = _run(server, block_s=0.25)
    finally:
        server.close()
    first, *rest = events
    assert server.sent[0] <= first[0] < server.sent[1]  # read in time: its own arrival
    stamps = [a for a, _, _ in events] + [end_ns]
    assert all(a <= seen for a, seen, _ in events)  # never later than the read
    assert shared_stamps(stamps) == (3, False)  # tok1, tok2 and the end: merged, flagged


def test_shared_stamps_count_equal_neighbours() -> None:
    assert shared_stamps([1, 2, 3]) == (0, False)
    assert shared_stamps([5, 5, 7, 8, 8]) == (4, True)
    assert shared_stamps([]) == (0, False)


def test_stamps_match_reads_when_the_reader_keeps_up() -> None:
    server = _SseServer(events=2, gap_s=0.02)
    try:
        events, _, _ = _run(server, block_s=0)
    finally:
        server.close()
    assert len(events) == 2
    _stamped_between_writes(events, server.sent)


def _stamped_between_writes(events: list[tuple[int, int, dict[str, Any]]], sent: list[int]) -> None:
    """Each event's stamp lies between its own write and the server's next one, and is never
    after the client read it."""
    for i, (arrival, seen, _) in enumerate(events):
        assert sent[i] <= arrival <= seen, (i, arrival - sent[i], seen - arrival)
        assert arrival < sent[i + 1], (i, arrival, sent[i + 1])  # the next write is the end's, at least


def test_an_error_status_is_a_stream_error_with_its_code() -> None:
    server = _SseServer(status=400)
    try:
        with pytest.raises(StampedStreamError) as err:
            _run(server, block_s=0)
    finally:
        server.close()
    assert err.value.kind == "http 400" and "bad" in str(err.value)
