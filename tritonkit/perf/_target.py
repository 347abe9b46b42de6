"""What every load-generator sender shares: the call target, the record a request becomes, the
error kinds failures are counted under, the sender's common state (:class:`SenderBase`) and the
gRPC request (built in :mod:`tritonkit.perf._grpc`, re-exported here for the senders).

The unary sender (:mod:`tritonkit.perf.loadgen`), the streaming one
(:mod:`tritonkit.perf._stream_sender`) and the OpenAI one (:mod:`tritonkit.perf._openai_sender`)
all build on this module, and the load generator picks between them; keeping the shared pieces
here keeps the senders free of an import loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tritonkit.client.connection import grpc_metadata
from tritonkit.client.control import read_refusal
from tritonkit.errors import PerfError
from tritonkit.llm_pipeline import ComposedPipeline
from tritonkit.perf._grpc import grpc_infer_request
from tritonkit.perf._http import HttpStatusError
from tritonkit.perf.inputs import Array
from tritonkit.perf.stream_metrics import StreamInfo, Timeline, timeline_record

__all__ = ["Arrivals", "Record", "SenderBase", "Target", "error_kind", "grpc_infer_request"]

#: (end_ns, latency_ns, error kind or None, streaming figures or None)
Record = tuple[int, int, "str | None", "StreamInfo | None"]


@dataclass(frozen=True)
class Target:
    """Where and what to call (everything a worker process needs, picklable)."""

    client_url: str  # tritonclient's url: host:port (+ HTTP path prefix)
    ssl: bool
    protocol: str
    model: str
    model_version: str
    outputs: tuple[str, ...]
    timeout_s: float = 30.0
    cacert: str | None = None  # PEM bundle to verify a TLS server with
    host: str = ""  # HTTP: where the pre-built requests go
    port: int = 0
    path_prefix: str = ""
    grpc_channels: int = 1  # separate HTTP/2 connections, used in turn
    stream: bool = False  # decoupled model: gRPC ModelStreamInfer / HTTP generate_stream
    grpc_streams: int = 1  # long-lived gRPC streams requests are spread over (stream only)
    tokenizer: str | None = None  # local tokenizer file counting output tokens (stream only)
    #: per request of the data set: (prompt tokens or -1, asked output tokens or -1) (LLM load)
    prompt_counts: tuple[tuple[int, int], ...] = ()
    engine_counts: bool = False  # responses carry num_output_tokens / num_input_tokens (vLLM)
    openai: str = ""  # an OpenAI-compatible server: "chat" or "completions" (streamed SSE)
    #: ``model`` is an LLM-decoder pipeline's front door, composed: its prompt model unary, then
    #: its LLM stage streamed (gRPC); ``stage_inputs``: that stage's input names
    pipeline: ComposedPipeline | None = None
    stage_inputs: tuple[str, ...] = ()


def error_kind(exc: BaseException, protocol: str) -> str:
    """A short, stable name for what went wrong with one request (for 'errors by kind')."""
    if isinstance(exc, HttpStatusError):
        return f"http {exc.status}"
    code = getattr(exc, "code", None)
    if protocol == "grpc" and callable(code):
        with contextlib.suppress(Exception):
            status_code = code()
            return f"grpc {getattr(status_code, 'name', status_code)}"
    code = read_refusal(exc).code  # the client boundary reads tritonclient's status
    if code:
        return f"{protocol} {code}"
    if isinstance(exc, asyncio.TimeoutError | TimeoutError):
        return "timeout"
    if isinstance(exc, ConnectionError | OSError):
        return "connection"
    name = type(exc).__name__
    if "Timeout" in name:
        return "timeout"
    if "Connect" in name or "Disconnect" in name:
        return "connection"
    return name


class Arrivals:
    """What one streamed request's responses said as they came: arrivals of the responses that
    carry outputs, tokens counted, how late the client saw each (kernel-stamped), the end."""

    def __init__(self) -> None:
        self.outputs: list[int] = []
        self.tokens: list[int] = []
        self.delays: list[int] = []  # kernel-stamped: arrival -> the client saw it
        self.final: list[int] = []  # when the stream ended (none: it did not end normally)

    def record(
        self,
        *,
        send_ns: int,
        error: str | None,
        tokens: tuple[int, ...],
        counts: tuple[int, int],
        shared: tuple[int, bool],
    ) -> Record:
        """The finished stream's record; ``counts``: its (prompt, asked output) tokens (-1:
        unknown), ``shared``: :func:`~tritonkit.perf.stream_metrics.shared_stamps` of it."""
        timeline = Timeline(
            send_ns=send_ns,
            output_ns=tuple(self.outputs),
            tokens=tokens,
            final_ns=self.final[0] if self.final else None,
            error=error,
            input_tokens=counts[0],
            asked_tokens=counts[1],
            client_delay_ns=sum(self.delays) // len(self.delays) if self.delays else -1,
            shared_stamps=shared[0],
            first_shared=shared[1],
        )
        return timeline_record(timeline)


class SenderBase:
    """What every sender keeps: the target, the request data set (sent in turn) and the headers
    (as gRPC metadata too). ``_headers_changed`` lets a sender rebuild what it made of them."""

    def __init__(self, *, target: Target, requests: Sequence[Mapping[str, Array]], conn_limit: int) -> None:
        if not requests:
            raise PerfError("no request data to send")
        self.target = target
        self._requests = list(requests)
        self._conn_limit = conn_limit
        self._next = 0
        self._headers: dict[str, str] = {}
        self._metadata: tuple[tuple[str, str], ...] = ()

    @property
    def headers(self) -> dict[str, str]:
        return self._headers

    @headers.setter
    def headers(self, value: Mapping[str, str]) -> None:
        self._headers = dict(value)
        self._metadata = tuple(grpc_metadata(value).items())
        self._headers_changed()

    def _headers_changed(self) -> None:
        """Called after the headers change (per-request HTTP heads are built from them)."""

    async def open(self) -> None:
        """Connect and encode the data set for the target's protocol."""
        if self.target.protocol == "grpc":
            self._open_grpc()
        else:
            self._open_http()

    def _open_grpc(self) -> None:
        raise PerfError(f"{type(self).__name__} does not send over gRPC")

    def _open_http(self) -> None:
        raise PerfError(f"{type(self).__name__} does not send over HTTP")

    def _next_index(self) -> int:
        """The index of the next request of the data set (they are sent in turn)."""
        index = self._next
        self._next = (index + 1) % len(self._requests)
        return index

    def _next_request(self) -> tuple[int, int, int]:
        """The next request's index, prompt tokens and asked output tokens (-1 where unknown)."""
        index = self._next_index()
        counts = self.target.prompt_counts
        prompt, asked = counts[index] if index < len(counts) else (-1, -1)
        return index, prompt, asked
