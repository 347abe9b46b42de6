"""TritonClient: the synchronous client over tritonclient HTTP/gRPC (one connection per thread)."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any, TypeVar

from numpy.typing import NDArray

from tritonkit.client._client_base import _Common
from tritonkit.client._errors import classify
from tritonkit.client._inputs import ModelInfo, PreparedInput, merge
from tritonkit.client._stream import (
    ParamValue,
    ResponseStream,
    StreamPlan,
    StreamResponse,
    StreamStats,
    next_wait,
)
from tritonkit.client._stream_transport import SyncStreamTransport
from tritonkit.client._transport import SyncTransport
from tritonkit.errors import (
    EndpointUnreachableError,
    RequestTimeoutError,
    ServerUnavailableError,
)

__all__ = ["TritonClient"]

T = TypeVar("T")


class TritonClient(_Common):
    """A synchronous Triton client over HTTP or gRPC.

    ``TritonClient("https://ep.region.inference.ml.azure.com", auth=KeyAuth(env="AML_KEY"))``,
    then ``client.infer("model", INPUT=array)`` -> ``{"OUTPUT": ndarray}``. Safe to share between
    threads (one tritonclient connection per thread). Retries transient failures per ``retry``.

    Keyword arguments: ``protocol`` ("http" or "grpc"), ``headers`` (static, sent on every call),
    ``auth`` (an AuthProvider), ``deployment`` (azureml-model-deployment), ``cacert`` (PEM bundle
    for a private CA; verification is on unless ``insecure=True``), ``connect_timeout`` and
    ``request_timeout`` (seconds), ``retry`` (RetryPolicy), ``max_concurrency`` (chunks in flight).
    """

    def _setup(self) -> None:
        self._transport, self._streams = self._transports(SyncTransport, SyncStreamTransport)
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        self._sleep: Callable[[float], None] = time.sleep

    def __enter__(self) -> TritonClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        self._transport.close()
        self._streams.close()

    def _headers(self) -> dict[str, str] | None:
        if self.auth is None:
            return dict(self._static_headers) if self._static_headers else None
        return self._merge(self.auth.headers())

    def _call(
        self, action: str, fn: Callable[[dict[str, str] | None], T], failed: Exception | None = None
    ) -> T:
        """Run ``fn(headers)`` with retries; map every failure once.

        ``failed``: the exception of a first attempt the caller already made (the inference hot
        path tries once inline, without building closures, and only comes here on failure).
        """
        attempt = 0
        while True:
            attempt += 1
            try:
                if failed is not None:
                    exc, failed = failed, None
                    raise exc
                return fn(self._headers())
            except Exception as exc:  # every failure goes through classify() exactly once
                failure = classify(exc, self._context(action))
                if isinstance(failure.error, (EndpointUnreachableError, RequestTimeoutError)):
                    # The connection may be dead or hold a late answer: never reuse it.
                    self._transport.reset()
                self._sleep(self._retry_delay(failure, exc, action, attempt))

    # -- model information ----------------------------------------------------------------
    def model_info(self, model: str, version: str = "") -> ModelInfo:
        """The model's inputs, outputs and batching (fetched once, then cached)."""
        info = self._models.get((model, version))
        if info is None:
            meta = self.model_metadata(model, version)
            info = self._remember(model, version, meta, self.model_config(model, version))
        return info

    def model_metadata(self, model: str, version: str = "") -> dict[str, Any]:
        t = self._transport
        return self._call(f"metadata request for model '{model}'", lambda h: t.metadata(model, version, h))

    def model_config(self, model: str, version: str = "") -> dict[str, Any]:
        t = self._transport
        return self._call(f"config request for model '{model}'", lambda h: t.config(model, version, h))

    def statistics(self, model: str = "", version: str = "") -> dict[str, Any]:
        """Triton's inference statistics (``/v2/models[/m]/stats``) as a dict."""
        t = self._transport
        return self._call("statistics request", lambda h: t.statistics(model, version, h))

    def is_ready(self, model: str | None = None, version: str = "") -> bool:
        """True when the server (or ``model``) is ready; False when it is not or cannot be reached.

        Authentication failures still raise: "not ready" would hide a wrong key.
        """
        t = self._transport
        try:
            if model is None:
                return self._call("readiness check", t.server_ready)
            return self._call(
                f"readiness check of model '{model}'", lambda h: t.model_ready(model, version, h)
            )
        except (EndpointUnreachableError, ServerUnavailableError):
            return False

    # -- inference ----------------------------------------------------------------------------
    def infer(
        self,
        model: str,
        inputs: Mapping[str, Any] | None = None,
        /,
        *,
        model_version: str = "",
        outputs: Sequence[str] | None = None,
        **named_inputs: Any,
    ) -> dict[str, NDArray[Any]]:
        """Run ``model`` on the inputs (keyword arguments, or a mapping for names that are not
        identifiers) and return every output (or ``outputs``) as numpy arrays.

        Inputs are checked against the model's metadata first (InputMismatchError); batches larger
        than the model's ``max_batch_size`` are split, sent concurrently and concatenated.
        """
        info = self._models.get((model, model_version)) or self.model_info(model, model_version)
        chunks, requested = self._infer_plan(info, model, inputs, named_inputs, outputs)
        if len(chunks) == 1:
            return self._infer_chunk(model, chunks[0], model_version, requested)
        send = functools.partial(self._infer_chunk, model, version=model_version, wanted=requested)
        return merge(list(self._executor().map(send, chunks)))

    def _infer_chunk(
        self, model: str, chunk: list[PreparedInput], version: str, wanted: Sequence[str]
    ) -> dict[str, NDArray[Any]]:
        """One request; its first attempt inline, so the common case pays for no closure and no
        retry frame."""
        t = self._transport
        try:
            return t.infer(model, chunk, version=version, outputs=wanted, headers=self._headers())
        except Exception as exc:  # noqa: BLE001 - handed to _call, which maps it
            return self._call(
                f"inference on model '{model}'",
                lambda h: t.infer(model, chunk, version=version, outputs=wanted, headers=h),
                failed=exc,
            )

    def stream(
        self,
        model: str,
        inputs: Mapping[str, Any] | None = None,
        /,
        *,
        model_version: str = "",
        outputs: Sequence[str] | None = None,
        request_id: str = "",
        parameters: Mapping[str, ParamValue] | None = None,
        first_response_timeout: float | None = None,
        response_timeout: float | None = None,
        total_timeout: float | None = None,
        **named_inputs: Any,
    ) -> ResponseStream:
        """Send one request and iterate over its responses as they arrive (decoupled models).

        ``for r in client.stream("gen", PROMPT="hi"): print(r.text("TEXT"), end="")``. Each item is
        a :class:`StreamResponse` (outputs as numpy, ``index``, ``final``, ``request_id``,
        ``parameters``). gRPC uses bidirectional streaming (``ModelStreamInfer``); HTTP uses
        Triton's ``generate_stream`` (server-sent events). Inputs are checked as for
        :meth:`infer` now; the request goes out on the first ``next()``.

        Timeouts (seconds; None: the client's ``request_timeout`` for the first two, no limit for
        the total): ``first_response_timeout``, ``response_timeout`` (between two responses),
        ``total_timeout``. Transient failures are retried per ``retry`` only before the first
        response; after it an error ends the stream (a retry would repeat pieces already seen).
        Leaving early (break, ``close()``, Ctrl-C) cancels the request on the server.
        """
        info = self._models.get((model, model_version)) or self.model_info(model, model_version)
        waits = self._waits(first_response_timeout, response_timeout, total_timeout)
        plan = self._stream_plan(
            info, model, model_version, inputs, named_inputs, outputs, request_id, parameters, waits
        )
        stats = StreamStats()
        return ResponseStream(self._stream_responses(plan, stats), stats)

    def _open_stream(self, plan: StreamPlan, stats: StreamStats) -> Any:
        headers = self._headers()
        if self.protocol == "grpc":
            return self._streams.open_grpc(plan.payload, headers)
        w = plan.waits
        left = None if w.total is None else max(0.0, w.total - (time.monotonic() - stats.started))
        return self._streams.open_http(plan, headers, first=next_wait(stats, w), gap=w.gap, total=left)

    def _stream_responses(
        self, plan: StreamPlan, stats: StreamStats
    ) -> Generator[StreamResponse, None, None]:
        call: Any = None
        attempt = 0
        stats.started = time.monotonic()
        try:
            while True:  # retries, only until the first response
                attempt += 1
                try:
                    call = self._open_stream(plan, stats)
                    response = call.next(next_wait(stats, plan.waits))
                    break
                except Exception as exc:
                    if call is not None:
                        call.cancel()
                        call = None
                    self._sleep(self._stream_retry_delay(exc, plan, attempt))
            while response is not None:
                stats.record()
                yield response
                if response.final:
                    return
                response = call.next(next_wait(stats, plan.waits))
        except Exception as exc:
            self._end_stream(exc, plan, stats)
        finally:
            if call is not None:
                call.cancel()

    def _executor(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.max_concurrency, thread_name_prefix="tritonkit-client")
            return self._pool
