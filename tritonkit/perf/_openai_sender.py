"""The OpenAI sender: streamed ``POST /v1/chat/completions`` or ``/v1/completions`` to an
OpenAI-compatible server (``tritonkit openai``, ``vllm serve``), timed as Triton's streams are.

Each request asks for ``stream: true`` with ``stream_options.include_usage``, so the server's own
token counts (its last chunk's ``usage``) count the output tokens, as the engine's counts do on
Triton; a server that sends ``usage: null`` (a tritonkit pipeline) falls back to ``--tokenizer``,
else one token per content chunk. TTFT is the first chunk carrying answer text (chat's opening
``role`` chunk carries none), the end of the body is the end of the stream, and plain HTTP is
kernel-stamped (:mod:`tritonkit.perf._kstamp`), so the figures sit beside a generate_stream run's.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tritonkit._timeouts import within
from tritonkit.errors import PerfError, StreamError
from tritonkit.perf._sse import SseStreams
from tritonkit.perf._target import Arrivals, Record, SenderBase, Target, error_kind
from tritonkit.perf.inputs import Array
from tritonkit.perf.llm import Prompt
from tritonkit.perf.stream_metrics import TokenCounter, shared_stamps

__all__ = ["OPENAI_APIS", "OpenAiSender", "openai_body", "openai_requests"]

#: ``--openai`` values and the route each one posts to
OPENAI_APIS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}


def openai_requests(prompts: Sequence[Prompt]) -> list[dict[str, Array]]:
    """The prompts as the load generator's request records (picklable for worker processes):
    ``prompt`` (UTF-8 bytes), ``max_tokens`` (when asked) and ``image`` (encoded bytes)."""
    out: list[dict[str, Array]] = []
    for p in prompts:
        request: dict[str, Array] = {"prompt": np.array([p.text.encode("utf-8")], dtype=np.object_)}
        if p.output_tokens is not None:
            request["max_tokens"] = np.array([p.output_tokens], dtype=np.int64)
        if p.image is not None:
            request["image"] = np.frombuffer(p.image, dtype=np.uint8)
        out.append(request)
    return out


def _image_url(data: bytes) -> str:
    kind = "png" if data.startswith(b"\x89PNG") else "jpeg"
    return f"data:image/{kind};base64," + base64.b64encode(data).decode("ascii")


def openai_body(request: Mapping[str, Array], *, model: str, api: str) -> bytes:
    """One request record as the JSON body of a streamed OpenAI call."""
    if api not in OPENAI_APIS:
        raise PerfError(f"unknown --openai API '{api}'", hint="use --openai chat or --openai completions")
    text = bytes(request["prompt"].reshape(-1)[0]).decode("utf-8")
    body: dict[str, Any] = {"model": model, "stream": True, "stream_options": {"include_usage": True}}
    if "max_tokens" in request:
        body["max_tokens"] = int(request["max_tokens"].reshape(-1)[0])
    image = request.get("image")
    if api == "completions":
        if image is not None:
            raise PerfError("an image needs --openai chat (completions take text only)")
        body["prompt"] = text
    elif image is not None:
        parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
        parts.append({"type": "image_url", "image_url": {"url": _image_url(image.tobytes())}})
        body["messages"] = [{"role": "user", "content": parts}]
    else:
        body["messages"] = [{"role": "user", "content": text}]
    return json.dumps(body).encode("utf-8")


def _chunk_text(event: Mapping[str, Any]) -> str:
    """The answer text one chunk carries (chat's delta content or a completion's text)."""
    parts = []
    for choice in event.get("choices") or ():
        if isinstance(choice, dict):
            delta = choice.get("delta")
            value = delta.get("content") if isinstance(delta, dict) else choice.get("text")
            if isinstance(value, str):
                parts.append(value)
    return "".join(parts)


class _Stream(Arrivals):
    """What one request's chunks said: arrivals of text chunks, tokens, the server's usage."""

    def __init__(self, counter: TokenCounter | None) -> None:
        super().__init__()
        self.counter = counter
        self.usage: tuple[int, int] | None = None  # (completion tokens, prompt tokens)

    def on_read(self, read_ns: int, event: Any) -> None:
        """An event read over TLS (no kernel stamp: read time is the arrival)."""
        if isinstance(event, dict):
            self.on_event(read_ns, -1, event)

    def on_event(self, arrival: int, seen: int, event: Mapping[str, Any]) -> None:
        usage = event.get("usage")
        if isinstance(usage, dict):
            self.usage = (int(usage.get("completion_tokens") or 0), int(usage.get("prompt_tokens") or -1))
        text = _chunk_text(event)
        if not text:
            return  # the opening role chunk, the finish chunk, the usage chunk: no answer text
        self.outputs.append(arrival)
        if seen >= 0:
            self.delays.append(seen - arrival)
        if self.counter is not None:
            self.tokens.append(self.counter.count(text))


class OpenAiSender(SenderBase):
    """Sends streamed OpenAI requests and turns each into a record with its :class:`Timeline`."""

    def __init__(self, *, target: Target, requests: Sequence[Mapping[str, Array]], conn_limit: int) -> None:
        super().__init__(target=target, requests=requests, conn_limit=conn_limit)
        self._payloads = [openai_body(r, model=target.model, api=target.openai) for r in requests]
        self._uri = f"{target.path_prefix}{OPENAI_APIS[target.openai]}"
        self._counter = TokenCounter(target.tokenizer) if target.tokenizer else None
        self._streams: SseStreams | None = None

    async def open(self) -> None:
        self._streams = SseStreams(self.target, conn_limit=self._conn_limit)

    async def close(self) -> None:
        if self._streams is not None:
            await self._streams.close()
            self._streams = None

    async def send(self) -> Record:
        """Stream the next request of the data set; never raises (errors become the record's kind)."""
        index, prompt, asked = self._next_request()
        streams = self._streams
        stream = _Stream(self._counter)
        send_ns = time.monotonic_ns()
        error: str | None = None
        try:
            if streams is None:
                raise PerfError("the sender is not open")
            if streams.kernel_stamped:
                send_ns, end_ns = await within(
                    streams.post_stamped(self._uri, self._headers, self._payloads[index], stream.on_event),
                    self.target.timeout_s,
                )
                stream.final.append(end_ns)
            else:
                t = self.target
                url = f"https://{t.host}:{t.port}{self._uri}"
                end_ns = await within(
                    streams.post_tls(url, self._headers, self._payloads[index], stream.on_read),
                    self.target.timeout_s,
                )
                stream.final.append(end_ns)
        except asyncio.CancelledError:
            raise
        except StreamError as exc:
            error = exc.kind
        except Exception as exc:  # every failure is data for 'errors by kind'
            error = error_kind(exc, "http")
        tokens: tuple[int, ...] = tuple(stream.tokens) if self._counter else ()
        if stream.usage is not None:  # the server's own count wins, as the engine's does
            tokens = (stream.usage[0],)
            prompt = stream.usage[1] if stream.usage[1] >= 0 else prompt
        stamped = streams is not None and streams.kernel_stamped
        shared = shared_stamps(stream.outputs) if stamped else (0, False)
        return stream.record(
            send_ns=send_ns, error=error, tokens=tokens, counts=(prompt, asked), shared=shared
        )
