"""Streamed POSTs answered with server-sent events, for the two senders that read them
(Triton's ``generate_stream``, an OpenAI server's streamed completions).

Plain HTTP goes over kernel-stamped raw sockets (:mod:`tritonkit.perf._kstamp`: each event
carries the arrival of the packet that held it); TLS over httpx, stamped when Python reads
each event. Either way the end of the response body is the end of the stream.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from typing import Any

from tritonkit.client.connection import httpx_verify
from tritonkit.errors import StreamError
from tritonkit.perf._target import Target

__all__ = ["SseStreams"]


class SseStreams:
    """The connections one sender's streamed requests go over (one pool per sender)."""

    def __init__(self, target: Target, *, conn_limit: int) -> None:
        self.target = target
        self._stamped: Any = None  # _kstamp.StampedHttpStreams (plain HTTP)
        self._client: Any = None  # httpx.AsyncClient (TLS)
        if not target.ssl:
            from tritonkit.perf._kstamp import StampedHttpStreams

            self._stamped = StampedHttpStreams(
                host=target.host, port=target.port, timeout_s=target.timeout_s, limit=conn_limit
            )
            return
        import httpx

        self._client = httpx.AsyncClient(
            verify=httpx_verify(target.cacert),
            timeout=httpx.Timeout(target.timeout_s),
            limits=httpx.Limits(max_connections=conn_limit, max_keepalive_connections=conn_limit),
        )

    @property
    def kernel_stamped(self) -> bool:
        """Whether events carry kernel arrival stamps (plain HTTP)."""
        return self._stamped is not None

    async def close(self) -> None:
        if self._stamped is not None:
            self._stamped.close()
            self._stamped = None
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.aclose()
            self._client = None

    async def post_stamped(
        self,
        uri: str,
        headers: dict[str, str],
        body: bytes,
        on_event: Callable[[int, int, dict[str, Any]], None],
    ) -> tuple[int, int]:
        """One plain-HTTP stream: ``on_event(arrival, seen, event)`` per event; returns when the
        request was sent and when its body ended."""
        from tritonkit.perf._kstamp import stream_head

        t = self.target
        head = stream_head(host=t.host, port=t.port, uri=uri, headers=headers, length=len(body))
        send_ns, end_ns = await self._stamped.stream(head, body, on_event)
        return int(send_ns), int(end_ns)

    async def post_tls(
        self, url: str, headers: dict[str, str], body: bytes, on_event: Callable[[int, Any], None]
    ) -> int:
        """One stream over httpx: ``on_event(read_ns, event)`` per ``data:`` event (an OpenAI
        ``[DONE]`` aside); returns when the body ended. A status other than 200, an event that
        is not JSON or one that carries ``error`` raises :class:`StreamError`."""
        headers = {**headers, "Content-Type": "application/json", "Accept": "text/event-stream"}
        async with self._client.stream("POST", url, content=body, headers=headers) as resp:
            if resp.status_code != 200:
                await resp.aread()
                raise StreamError(resp.text[:200], kind=f"http {resp.status_code}")
            async for line in resp.aiter_lines():
                if not line.startswith("data:") or line[5:].strip() == "[DONE]":
                    continue
                now = time.monotonic_ns()
                try:
                    event = json.loads(line[5:])
                except ValueError as exc:
                    raise StreamError(line[:200], kind="http bad event") from exc
                if isinstance(event, dict) and "error" in event:
                    raise StreamError(str(event["error"])[:200], kind="http stream error")
                on_event(now, event)
            return time.monotonic_ns()
