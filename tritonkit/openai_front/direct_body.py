"""Writing a streamed body straight to the client's connection, from an event-loop callback.

The ASGI way to send a piece of a body is a coroutine (``await send(...)``) behind Starlette's
middleware: three coroutine layers and a task switch for every token. The OpenAI front's relay
(:mod:`tritonkit.openai_front.relay`) instead writes each piece from the callback that read it
from Triton, which needs the connection itself. uvicorn does not hand it to the app, so the front
runs uvicorn with :func:`protocol_class`: uvicorn's own httptools protocol that puts a
:class:`DirectBody` for each request in the ASGI scope's extensions (``scope["extensions"]
[EXTENSION]``). Everything else (the head, the last chunk, keep-alive, flow control, shutdown)
stays uvicorn's; a DirectBody only writes body chunks, framed exactly as uvicorn frames them.

This is the one module that knows uvicorn's request cycle. When that cycle is not what it expects
(another uvicorn, the h11 protocol), no extension is set and the front sends every piece the ASGI
way: slower, never wrong.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

__all__ = ["EXTENSION", "DirectBody", "direct_body", "protocol_class"]

log = logging.getLogger(__name__)

#: the ASGI scope extension that holds a request's :class:`DirectBody`
EXTENSION = "tritonkit.direct_body"

#: what :class:`DirectBody` reads of uvicorn's ``RequestResponseCycle``
_CYCLE_FIELDS = (
    "transport",
    "flow",
    "chunked_encoding",
    "disconnected",
    "response_started",
    "response_complete",
)


class DirectBody:
    """The body of one response, written chunk by chunk to its connection (HTTP/1.1 chunked, as
    uvicorn writes it) once the ASGI app has started the response."""

    __slots__ = ("_cycle",)

    def __init__(self, cycle: Any) -> None:
        self._cycle = cycle

    def writable(self) -> bool:
        """Whether a chunk can go now: the response is started and chunked, the client is still
        there and its socket is not full (uvicorn's flow control paused writing: then the ASGI
        ``send``, which waits for the socket to drain, is the way)."""
        cycle = self._cycle
        return bool(
            cycle.response_started
            and cycle.chunked_encoding
            and not cycle.response_complete
            and not cycle.disconnected
            and not cycle.flow.write_paused
            and not cycle.transport.is_closing()
        )

    def paused(self) -> bool:
        """Whether the client's socket is full (uvicorn paused writing until it drains)."""
        return bool(self._cycle.flow.write_paused)

    def write(self, data: bytes) -> None:
        """One chunk (call only when :meth:`writable`; ``data`` not empty)."""
        self._cycle.transport.write(b"%x\r\n%b\r\n" % (len(data), data))


def direct_body(scope: Any) -> DirectBody | None:
    """The request's DirectBody (None when the server gives none)."""
    extensions = scope.get("extensions")
    return extensions.get(EXTENSION) if extensions else None


@functools.cache
def protocol_class() -> type | None:
    """uvicorn's httptools protocol with a :class:`DirectBody` in each request's scope (None when
    httptools is missing or uvicorn's request cycle is not the one this module knows)."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle
    except ImportError:
        return None
    probe = RequestResponseCycle.__init__.__code__.co_names + RequestResponseCycle.send.__code__.co_names
    if not all(name in probe for name in _CYCLE_FIELDS):
        log.info("uvicorn's request cycle is not the one tritonkit knows: streams go the ASGI way")
        return None

    class DirectBodyProtocol(HttpToolsProtocol):
        def on_headers_complete(self) -> None:
            super().on_headers_complete()
            cycle = getattr(self, "cycle", None)
            if cycle is not None and cycle.scope is self.scope:
                self.scope.setdefault("extensions", {})[EXTENSION] = DirectBody(cycle)

    return DirectBodyProtocol
