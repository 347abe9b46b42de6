"""Reading a BLS stream (``exec(decoupled=True)``) safely on Triton 2.51's Python stub.

Shipped beside the ``model.py`` that imports it (a spec's ``files:``); imports only the stdlib.
Two faults of the stub (python_backend r24.10, still in its 2025 source; docs/known-issues.md)
shape how a Python model may read a streaming BLS call:

1. **A deadlock between threads.** ``exec(decoupled=True)`` takes the stub's map of response
   iterators while holding the GIL; the stub's thread that delivers stream responses holds that
   map while it waits for an iterator's own mutex; and ``ResponseIterator.__next__``, woken by a
   response, holds that iterator's mutex while it waits for the GIL. One thread starting a stream
   while another thread's stream is being delivered to can close the cycle, and the stub hangs
   for good (seen with gdb: every client of the model got no response). So a model reads its BLS
   streams from **one thread**: the one that runs ``execute``, one request at a time, with
   concurrency from ``instance_group`` count (each instance is a process of its own).
   :class:`BlsStream` refuses a stream opened while another thread has one open.
2. **Frees without the GIL.** At a stream's last response the stub queues a cleanup; its utility
   thread then erases the stub's own reference to the iterator without the GIL. If the model let
   go first, that erase frees every response's numpy arrays there, and the stub dies later in
   ``pymalloc``. :meth:`BlsStream.close` lets go only after that cleanup has run: it first asks
   the model's response sender ``is_cancelled()``, a round trip through the same utility thread,
   queued after the cleanup (the thread serves its queue in order), so once it returns the last
   reference is the model's, dropped here holding the GIL. But the stub caches a *true* answer
   (``PbCancel::IsCancelled`` returns it at once, with no round trip, once the request was seen
   cancelled): after a client left, that call orders nothing, and dropping the stream then let
   the utility thread free its responses without the GIL (the LLM front's crashes after a
   cancelled stream). Such a stream is kept until a later call answers false, which did make
   the round trip (:data:`_PENDING`). ``ResponseSender.send`` has the same flaw for outputs the
   client did not ask for (it drops them after releasing the GIL): send only
   :func:`requested_outputs`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from typing import Any

__all__ = ["BlsStream", "release_pending", "requested_outputs"]

_LOCK = threading.Lock()
#: the thread reading this process's open BLS streams, and how many it has open
_OPEN: dict[str, int] = {"thread": 0, "count": 0}
#: iterators whose cleanup could not be waited for: kept for the process's life rather than freed
#: by the stub's utility thread without the GIL
_PARKED: list[Any] = []
#: iterators closed when the sender's is_cancelled() answered true (cached by the stub, no round
#: trip): let go of at the next close whose is_cancelled() answered false (a round trip, queued
#: after their cleanups)
_PENDING: list[Any] = []


class BlsStream:
    """One streaming BLS call: iterate its responses, then :meth:`close` it (or use ``with``).

    ``sender`` is the response sender of the request this stream answers (its ``is_cancelled()``
    is the round trip that orders the release after the stub's cleanup).
    """

    def __init__(self, request: Any, sender: Any) -> None:
        me = threading.get_ident()
        with _LOCK:
            if _OPEN["count"] and _OPEN["thread"] != me:
                raise RuntimeError(
                    "a BLS stream is open in another thread of this model instance: on Triton 2.51 "
                    "two threads reading BLS streams can deadlock the stub; read them from execute()"
                )
            _OPEN["thread"], _OPEN["count"] = me, _OPEN["count"] + 1
        self._sender = sender
        self._responses: Any = None
        try:
            self._responses = request.exec(decoupled=True)
        except BaseException:
            self._leave()
            raise

    def __iter__(self) -> Iterator[Any]:
        if self._responses is None:
            raise RuntimeError("the BLS stream is closed")
        return iter(self._responses)

    @property
    def cancel(self) -> Any:
        """The iterator's ``cancel`` (Triton's Python backend after 2.51), else None."""
        return getattr(self._responses, "cancel", None)

    def close(self) -> None:
        """Let go of the stream once the stub's cleanup of it has certainly run."""
        responses, self._responses = self._responses, None
        if responses is None:
            return
        self._leave()
        try:
            cancelled = self._sender.is_cancelled()  # queued after the stream's cleanup...
        except Exception:  # noqa: BLE001 - no round trip: keep the stream rather than risk the stub
            _PARKED.append(responses)
            return
        if cancelled:  # ...unless the stub answered from its cache: the cleanup may be pending
            _PENDING.append(responses)
            return
        # a false answer made the round trip: this stream's cleanup and every pending one's ran
        released = [responses, *_PENDING]
        _PENDING.clear()
        del responses, released  # the last references, dropped here, holding the GIL

    def _leave(self) -> None:
        with _LOCK:
            _OPEN["count"] -= 1

    def __enter__(self) -> BlsStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def release_pending() -> None:
    """Let go of the streams closed after their client left, right after an ``is_cancelled()``
    that certainly made the round trip: a request's first (the stub caches only a true answer),
    or any that answered false. Call it holding the GIL, from the thread that reads the streams;
    without it they wait for the next stream that closes with a false answer."""
    released = list(_PENDING)
    _PENDING.clear()
    del released  # dropped here, holding the GIL


def requested_outputs(request: Any, available: Iterable[str]) -> frozenset[str]:
    """The outputs among ``available`` that ``request`` asked for (all of them when it names none,
    as Triton then sends every output): the only ones a response to it may carry."""
    names = getattr(request, "requested_output_names", None)
    asked = frozenset(str(n) for n in names()) if names is not None else frozenset()
    offered = frozenset(available)
    return (asked & offered) or offered
