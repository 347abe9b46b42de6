"""The hot path of a streamed answer: Triton's events become the client's chunks in one callback.

A streamed completion of an LLM stage is, per token, one server-sent event in (Triton's HTTP
``generate_stream``) and one out (OpenAI's chunk). Read the generic way, each token wakes a task
that climbs through the client's stream, the choice's generator and the SSE body, and leaves
through Starlette's ``send``: most of the front's CPU per token (py-spy on the clock model,
issue #40). :class:`EngineRelay` does the same work where the bytes arrive: the callback that
hands Triton's connection its data (:attr:`tritonkit.client._stream_h1._Exchange.sink`) reads
each event (:meth:`ChoiceRun.read_sse`), makes its chunk from the stream's template and writes
every chunk of that read at once to the client's connection (:class:`DirectBody`). No task is
woken and no future made per token; one timer per wait, re-armed only when it fires.

The relay only moves plain pieces. Whatever else happens hands the answer back to the generic
path where it was, nothing consumed twice: the end of the answer (its finish chunk, usage,
``[DONE]``), an event it does not read (an error, log-probabilities, anything unexpected), a
client whose socket is full (the ASGI ``send`` waits for it to drain), a broken connection, or a
wait that ran out (the transport's own timeout error, as the generic read would raise it).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from tritonkit.client import AsyncResponseStream
from tritonkit.errors import StreamTimeoutError
from tritonkit.openai_front.direct_body import DirectBody
from tritonkit.openai_front.generate import ChoiceRun

__all__ = ["EngineRelay"]


class EngineRelay:
    """Relays one choice's engine stream (Triton's HTTP events) to its client's connection."""

    __slots__ = ("_body", "_conn", "_done", "_piece", "_read", "_stats", "_timer", "_waits")

    def __init__(
        self, stream: AsyncResponseStream, run: ChoiceRun, piece: Callable[[str], bytes], body: DirectBody
    ) -> None:
        self._conn: Any = stream.call.connection  # the client's HTTP connection (_stream_h1)
        self._stats, self._waits = stream.stats, stream.waits
        self._read, self._piece, self._body = run.read_sse, piece, body
        self._done: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None

    @classmethod
    def of(cls, run: ChoiceRun, piece: Callable[[str], bytes], body: DirectBody | None) -> EngineRelay | None:
        """The relay of ``run`` (None when its answer does not come as Triton's HTTP events, or
        there is no DirectBody)."""
        stream = run.stream
        # only an HTTP stream's call (client/_stream_h1.py) has the connection the relay reads
        if body is None or stream is None or getattr(stream.call, "connection", None) is None:
            return None
        if not run.reads_sse():
            return None
        return cls(stream, run, piece, body)

    async def run(self) -> None:
        """Relay until the answer needs the generic path again (see the module's doc)."""
        conn = self._conn
        done = self._done = asyncio.get_running_loop().create_future()
        conn.sink = self._on_data
        try:
            self._on_data()  # what came while the last chunk was being sent
            if not done.done():
                self._arm()
                await done
        finally:
            conn.sink = None
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    # -- in the event loop's callbacks -------------------------------------------------------
    def _on_data(self) -> None:
        conn, body = self._conn, self._body
        events = conn.events
        if events:
            if not body.writable():
                self._stop()
                return
            out: list[bytes] = []
            read, piece = self._read, self._piece
            n = 0
            while events:
                text = read(events[0])
                if text is None:  # not a plain piece: the generic path reads it
                    break
                events.popleft()
                n += 1
                if text:
                    out.append(piece(text))
            if n:
                stats = self._stats
                stats.responses += n
                stats.last = time.monotonic()
            if out:
                body.write(b"".join(out))
            if events or body.paused():
                self._stop()
                return
        if conn.complete or conn.error is not None or conn.lost:
            self._stop()

    def _stop(self) -> None:
        done = self._done
        if done is not None and not done.done():
            done.set_result(None)

    def _deadline(self) -> float | None:
        waits, stats = self._waits, self._stats
        if waits is None:
            return None
        deadline = None if waits.gap is None else (stats.last or stats.started) + waits.gap
        if waits.total is not None:
            end = stats.started + waits.total
            deadline = end if deadline is None else min(deadline, end)
        return deadline

    def _arm(self) -> None:
        deadline = self._deadline()
        if deadline is not None:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_at(loop.time() + (deadline - time.monotonic()), self._expire)

    def _expire(self) -> None:
        """The wait's timer fired: re-armed when a piece came since, else the stream's timeout
        (raised by the generic read, as it would have raised it)."""
        self._timer = None
        deadline = self._deadline()
        if deadline is not None and time.monotonic() < deadline:
            self._arm()
            return
        conn = self._conn
        if conn.error is None and not conn.complete:
            conn.error = StreamTimeoutError("wait")
        self._stop()
