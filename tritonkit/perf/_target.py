"""What both load-generator senders share: the call target, the record a request becomes, the
error kinds failures are counted under (the gRPC request pieces, built in :mod:`tritonkit.perf._grpc`,
are re-exported here for the senders).

The unary sender (:mod:`tritonkit.perf.loadgen`) and the streaming one
(:mod:`tritonkit.perf._stream_sender`) both build on this module, and the load generator picks
between them; keeping the shared pieces here keeps the two senders free of an import loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from tritonkit.client.control import read_refusal
from tritonkit.perf._grpc import grpc_channels, grpc_infer_request
from tritonkit.perf._http import HttpStatusError
from tritonkit.perf.stream_metrics import StreamInfo

__all__ = ["Record", "Target", "error_kind", "grpc_channels", "grpc_infer_request"]

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
