"""TritonClient and AsyncTritonClient: one API over tritonclient HTTP/gRPC, sync and asyncio."""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from numpy.typing import NDArray

from tritonkit.client._errors import CallContext, Failure, classify
from tritonkit.client._inputs import ModelInfo, PreparedInput, merge, prepare, prepare_fast, split
from tritonkit.client._stream import (
    AsyncResponseStream,
    ParamValue,
    ResponseStream,
    StreamError,
    StreamResponse,
    StreamStats,
    StreamTimeoutError,
    StreamWaits,
    generate_body,
    grpc_request,
    next_wait,
    stream_failure,
)
from tritonkit.client._stream_transport import AsyncStreamTransport, SyncStreamTransport
from tritonkit.client._transport import AsyncTransport, SyncTransport
from tritonkit.client.auth import AuthProvider, CombinedAuth, DeploymentRouting, for_protocol, secrets_of
from tritonkit.client.endpoint import Endpoint, parse_url
from tritonkit.client.retry import RetryPolicy
from tritonkit.errors import (
    ClientError,
    EndpointUnreachableError,
    InferenceError,
    InputMismatchError,
    RequestTimeoutError,
    ServerUnavailableError,
)

__all__ = ["AsyncTritonClient", "TritonClient"]

logger = logging.getLogger(__name__)
T = TypeVar("T")

_SECRET_HEADER_WORDS = ("authorization", "key", "token", "secret", "password", "triton-grpc-protocol")


@dataclass(frozen=True)
class _StreamPlan:
    model: str
    version: str
    info: ModelInfo
    wanted: list[str] | None
    payload: Any  # gRPC ModelInferRequest or the generate_stream JSON body
    waits: StreamWaits
    action: str


class _Common:
    """Configuration and helpers shared by the sync and async clients."""

    def __init__(
        self,
        url: str,
        *,
        protocol: str = "http",
        headers: Mapping[str, str] | None = None,
        auth: AuthProvider | None = None,
        deployment: str | None = None,
        cacert: str | Path | None = None,
        insecure: bool = False,
        connect_timeout: float = 10.0,
        request_timeout: float = 60.0,
        retry: RetryPolicy | None = None,
        max_concurrency: int = 4,
    ) -> None:
        self.endpoint: Endpoint = parse_url(url, protocol)
        self.protocol = protocol
        providers: list[AuthProvider] = [auth] if auth is not None else []
        if deployment:
            providers.append(DeploymentRouting(deployment))
        combined: AuthProvider | None = (
            None if not providers else providers[0] if len(providers) == 1 else CombinedAuth(*providers)
        )
        self.auth = for_protocol(combined, protocol) if combined is not None else None
        self._static_headers = dict(headers or {})
        if cacert is not None and not Path(cacert).is_file():
            raise ClientError(
                f"CA certificate file {cacert} does not exist", hint="pass the PEM file of your CA"
            )
        self.cacert = cacert
        self.insecure = insecure
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self.retry = retry if retry is not None else RetryPolicy()
        self.max_concurrency = max(1, max_concurrency)
        self._models: dict[tuple[str, str], ModelInfo] = {}
        self._rand: Callable[[], float] = random.random
        self._setup()

    def _setup(self) -> None:
        """Create the transport (subclasses)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        cred = self.auth.describe() if self.auth is not None else "no auth"
        return f"{type(self).__name__}({str(self.endpoint)!r}, protocol={self.protocol!r}, {cred})"

    # -- headers and error context -------------------------------------------------------
    def _merge(self, auth_headers: Mapping[str, str] | None) -> dict[str, str] | None:
        if not self._static_headers and not auth_headers:
            return None
        merged = dict(self._static_headers)
        if auth_headers:
            merged.update(auth_headers)
        return merged

    def _credential(self) -> str | None:
        parts = []
        if self.auth is not None:
            parts.append(self.auth.describe())
        secret_like = [k for k in self._static_headers if any(w in k.lower() for w in _SECRET_HEADER_WORDS)]
        if secret_like:
            parts.append(f"header(s) {', '.join(secret_like)} given in headers=")
        return " + ".join(parts) or None

    def _secrets(self) -> list[str]:
        values = secrets_of(self.auth)
        for k, v in self._static_headers.items():
            if any(w in k.lower() for w in _SECRET_HEADER_WORDS):
                values.append(v)
                values.extend(v.split()[1:])  # "Bearer <key>" -> also the bare key
        return values

    def _context(self, action: str) -> CallContext:
        return CallContext(str(self.endpoint), action, self._credential(), self._secrets())

    def _give_up(self, failure: Failure, attempts: int, exc: BaseException) -> ClientError:
        err = failure.error
        if failure.retryable and attempts > 1:
            err.message = f"{err.message} (gave up after {attempts} attempts)"
            err.args = (err.message,)
        return err

    def _next_delay(self, failure: Failure, retry_index: int) -> float:
        return self.retry.delay(retry_index, retry_after=failure.retry_after, rand=self._rand)

    def _retry_delay(self, failure: Failure, exc: Exception, action: str, attempt: int) -> float:
        """The wait before attempt ``attempt + 1``; raises the mapped error instead when the
        failure is not transient or the attempts are spent (sync and async callers alike)."""
        if not failure.retryable or attempt >= self.retry.max_attempts:
            raise self._give_up(failure, attempt, exc) from exc
        delay = self._next_delay(failure, attempt - 1)
        logger.info(
            "%s failed (%s); retry %d/%d in %.2fs",
            action,
            type(failure.error).__name__,
            attempt,
            self.retry.max_attempts - 1,
            delay,
        )
        return delay

    def forget(self, model: str | None = None) -> None:
        """Drop cached model information (after the model was reloaded with a new signature)."""
        if model is None:
            self._models.clear()
        else:
            for key in [k for k in self._models if k[0] == model]:
                del self._models[key]

    def _outputs(self, info: ModelInfo, outputs: Sequence[str] | None) -> Sequence[str]:
        if outputs is None:
            return info.output_names
        known = {o.name for o in info.outputs}
        unknown = [o for o in outputs if o not in known]
        if unknown:
            from tritonkit.errors import InputMismatchError

            raise InputMismatchError(
                f"model '{info.name}' has no output named {', '.join(map(repr, unknown))}; "
                f"its outputs are {', '.join(sorted(known))}",
                hint="leave outputs= out to get all of them",
            )
        return list(outputs)

    def _prepare(
        self, info: ModelInfo, model: str, inputs: Mapping[str, Any] | None, named: Mapping[str, Any]
    ) -> list[list[PreparedInput]]:
        given: Mapping[str, Any] = named if inputs is None else {**inputs, **named}
        prepared, batch = prepare(info, given)
        return split(prepared, batch, info.max_batch_size)

    # -- streaming -------------------------------------------------------------------------------
    @staticmethod
    def _decoupled_error(model: str, info: ModelInfo) -> InferenceError:
        message = (
            f"model '{model}' is decoupled (model_transaction_policy): it answers with a stream of "
            "responses, which infer() cannot receive (Triton refuses it: HTTP 501 / gRPC UNIMPLEMENTED)"
        )
        if info.backend == "vllm":
            # NVIDIA's vllm backend is decoupled whatever the request asks: a whole answer at once
            # is a stream of one response.
            return InferenceError(
                message + "; a vLLM stage is always decoupled",
                hint=(
                    f"stream it: client.stream('{model}', llm_inputs(prompt, sampling={{...}})); for the "
                    "whole answer in one response pass stream=False (CLI: tritonkit infer --stream "
                    "--input text_input=... --input stream=false)"
                ),
            )
        return InferenceError(message, hint="use client.stream(model, ...) (CLI: tritonkit infer --stream)")

    def _stream_plan(
        self,
        info: ModelInfo,
        model: str,
        version: str,
        inputs: Mapping[str, Any] | None,
        named: Mapping[str, Any],
        outputs: Sequence[str] | None,
        request_id: str,
        parameters: Mapping[str, ParamValue] | None,
        waits: StreamWaits,
    ) -> _StreamPlan:
        """Everything one streamed request needs, checked before anything is sent."""
        chunks = self._prepare(info, model, inputs, named)
        if len(chunks) > 1:
            raise InputMismatchError(
                f"a streamed request to model '{model}' is one request; the batch is larger than its "
                f"max_batch_size {info.max_batch_size}",
                hint="send at most max_batch_size samples per stream (or one stream per chunk)",
            )
        wanted = list(self._outputs(info, outputs)) if outputs is not None else None
        if self.protocol == "grpc":
            payload: Any = grpc_request(
                model,
                chunks[0],
                version=version,
                outputs=wanted or (),
                request_id=request_id,
                parameters=parameters,
            )
        else:
            payload = generate_body(info, chunks[0], request_id=request_id, parameters=parameters)
        return _StreamPlan(
            model, version, info, wanted, payload, waits, f"streamed inference on model '{model}'"
        )

    def _waits(self, first: float | None, gap: float | None, total: float | None) -> StreamWaits:
        return StreamWaits(
            self.request_timeout if first is None else first,
            self.request_timeout if gap is None else gap,
            total,
        )

    def _stream_failure(self, exc: Exception, plan: _StreamPlan, stats: StreamStats) -> ClientError:
        ctx = self._context(plan.action)
        return stream_failure(exc, ctx, stats, plan.waits)


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
        self._transport = SyncTransport(
            self.endpoint,
            connect_timeout=self.connect_timeout,
            request_timeout=self.request_timeout,
            cacert=self.cacert,
            insecure=self.insecure,
        )
        self._streams = SyncStreamTransport(
            self.endpoint, connect_timeout=self.connect_timeout, cacert=self.cacert, insecure=self.insecure
        )
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
        key = (model, version)
        info = self._models.get(key)
        if info is None:
            meta = self.model_metadata(model, version)
            cfg = self.model_config(model, version)
            info = self._models[key] = ModelInfo.from_metadata(meta, cfg, version=version)
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
        if info.decoupled:
            raise self._decoupled_error(model, info)
        t = self._transport
        if inputs is None and outputs is None:
            # Hot path: checked numpy batches that fit in one request (see prepare_fast).
            fast = prepare_fast(info, named_inputs)
            if fast is not None and fast[1] <= info.max_batch_size:
                chunk, wanted = fast[0], info.output_names
                try:
                    return t.infer(
                        model, chunk, version=model_version, outputs=wanted, headers=self._headers()
                    )
                except Exception as exc:  # noqa: BLE001 - handed to _call, which maps it
                    return self._call(
                        f"inference on model '{model}'",
                        lambda h: t.infer(model, chunk, version=model_version, outputs=wanted, headers=h),
                        failed=exc,
                    )
        chunks = self._prepare(info, model, inputs, named_inputs)
        requested = self._outputs(info, outputs)

        def send(chunk: list[PreparedInput]) -> dict[str, NDArray[Any]]:
            wanted = requested
            try:  # first attempt inline: the common case pays for no closure and no retry frame
                return t.infer(model, chunk, version=model_version, outputs=wanted, headers=self._headers())
            except Exception as exc:  # noqa: BLE001 - handed to _call, which maps it
                return self._call(
                    f"inference on model '{model}'",
                    lambda h: t.infer(model, chunk, version=model_version, outputs=wanted, headers=h),
                    failed=exc,
                )

        if len(chunks) == 1:
            return send(chunks[0])
        return merge(list(self._executor().map(send, chunks)))

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

    def _open_stream(self, plan: _StreamPlan, stats: StreamStats) -> Any:
        headers = self._headers()
        if self.protocol == "grpc":
            return self._streams.open_grpc(plan.payload, headers)
        w = plan.waits
        left = None if w.total is None else max(0.0, w.total - (time.monotonic() - stats.started))
        return self._streams.open_http(
            plan.model,
            plan.version,
            plan.payload,
            headers,
            first=next_wait(stats, w),
            gap=w.gap,
            total=left,
            info=plan.info,
            wanted=plan.wanted,
        )

    def _stream_responses(
        self, plan: _StreamPlan, stats: StreamStats
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
                except (StreamError, StreamTimeoutError):
                    raise
                except Exception as exc:
                    if call is not None:
                        call.cancel()
                        call = None
                    failure = classify(exc, self._context(plan.action))
                    self._sleep(self._retry_delay(failure, exc, plan.action, attempt))
            while response is not None:
                stats.record()
                yield response
                if response.final:
                    return
                response = call.next(next_wait(stats, plan.waits))
        except (StreamError, StreamTimeoutError) as exc:  # the stream's own signals (ClientErrors too)
            raise self._stream_failure(exc, plan, stats) from exc
        except ClientError:
            raise
        except Exception as exc:  # every failure is mapped here, once
            raise self._stream_failure(exc, plan, stats) from exc
        finally:
            if call is not None:
                call.cancel()

    def _executor(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.max_concurrency, thread_name_prefix="tritonkit-client")
            return self._pool


class AsyncTritonClient(_Common):
    """The asyncio twin of :class:`TritonClient` (tritonclient's ``http.aio`` / ``grpc.aio``)."""

    def _setup(self) -> None:
        self._transport = AsyncTransport(
            self.endpoint,
            connect_timeout=self.connect_timeout,
            request_timeout=self.request_timeout,
            cacert=self.cacert,
            insecure=self.insecure,
        )
        self._streams = AsyncStreamTransport(
            self.endpoint, connect_timeout=self.connect_timeout, cacert=self.cacert, insecure=self.insecure
        )
        self._sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    async def __aenter__(self) -> AsyncTritonClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await self._transport.close()
        await self._streams.close()

    async def _headers(self) -> dict[str, str] | None:
        return self._merge(await self.auth.aheaders() if self.auth is not None else None)

    async def _call(self, action: str, fn: Callable[[dict[str, str] | None], Awaitable[T]]) -> T:
        attempt = 0
        while True:
            attempt += 1
            try:
                return await fn(await self._headers())
            except Exception as exc:  # every failure goes through classify() exactly once
                failure = classify(exc, self._context(action))
                await self._sleep(self._retry_delay(failure, exc, action, attempt))

    async def model_info(self, model: str, version: str = "") -> ModelInfo:
        key = (model, version)
        info = self._models.get(key)
        if info is None:
            meta = await self.model_metadata(model, version)
            cfg = await self.model_config(model, version)
            info = self._models[key] = ModelInfo.from_metadata(meta, cfg, version=version)
        return info

    async def model_metadata(self, model: str, version: str = "") -> dict[str, Any]:
        t = self._transport
        return await self._call(
            f"metadata request for model '{model}'", lambda h: t.metadata(model, version, h)
        )

    async def model_config(self, model: str, version: str = "") -> dict[str, Any]:
        t = self._transport
        return await self._call(f"config request for model '{model}'", lambda h: t.config(model, version, h))

    async def statistics(self, model: str = "", version: str = "") -> dict[str, Any]:
        t = self._transport
        return await self._call("statistics request", lambda h: t.statistics(model, version, h))

    async def is_ready(self, model: str | None = None, version: str = "") -> bool:
        t = self._transport
        try:
            if model is None:
                return await self._call("readiness check", t.server_ready)
            return await self._call(
                f"readiness check of model '{model}'", lambda h: t.model_ready(model, version, h)
            )
        except (EndpointUnreachableError, ServerUnavailableError):
            return False

    async def infer(
        self,
        model: str,
        inputs: Mapping[str, Any] | None = None,
        /,
        *,
        model_version: str = "",
        outputs: Sequence[str] | None = None,
        **named_inputs: Any,
    ) -> dict[str, NDArray[Any]]:
        """See :meth:`TritonClient.infer`; chunks go out concurrently (at most ``max_concurrency``)."""
        info = self._models.get((model, model_version)) or await self.model_info(model, model_version)
        if info.decoupled:
            raise self._decoupled_error(model, info)
        t = self._transport
        if inputs is None and outputs is None:
            fast = prepare_fast(info, named_inputs)  # hot path, as in TritonClient.infer
            if fast is not None and fast[1] <= info.max_batch_size:
                chunk, names = fast[0], info.output_names
                return await self._call(
                    f"inference on model '{model}'",
                    lambda h: t.infer(model, chunk, version=model_version, outputs=names, headers=h),
                )
        chunks = self._prepare(info, model, inputs, named_inputs)
        wanted = self._outputs(info, outputs)
        action = f"inference on model '{model}'"

        async def send(chunk: list[PreparedInput]) -> dict[str, NDArray[Any]]:
            return await self._call(
                action, lambda h: t.infer(model, chunk, version=model_version, outputs=wanted, headers=h)
            )

        if len(chunks) == 1:
            return await send(chunks[0])
        gate = asyncio.Semaphore(self.max_concurrency)

        async def gated(chunk: list[PreparedInput]) -> dict[str, NDArray[Any]]:
            async with gate:
                return await send(chunk)

        return merge(list(await asyncio.gather(*(gated(c) for c in chunks))))

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
    ) -> AsyncResponseStream:
        """See :meth:`TritonClient.stream`: ``async for r in client.stream(...)``.

        Nothing is checked or sent before the first ``__anext__`` (input errors surface there).
        Cancelling the iterating task cancels the request on the server.
        """
        waits = self._waits(first_response_timeout, response_timeout, total_timeout)
        stats = StreamStats()

        async def plan() -> _StreamPlan:
            info = self._models.get((model, model_version)) or await self.model_info(model, model_version)
            return self._stream_plan(
                info, model, model_version, inputs, named_inputs, outputs, request_id, parameters, waits
            )

        return AsyncResponseStream(self._stream_responses(plan, stats), stats)

    async def _open_stream(self, plan: _StreamPlan, stats: StreamStats) -> Any:
        headers = await self._headers()
        if self.protocol == "grpc":
            return await self._streams.open_grpc(plan.payload, headers)
        return await self._streams.open_http(
            plan.model,
            plan.version,
            plan.payload,
            headers,
            first=next_wait(stats, plan.waits),
            info=plan.info,
            wanted=plan.wanted,
        )

    async def _stream_responses(
        self, make_plan: Callable[[], Awaitable[_StreamPlan]], stats: StreamStats
    ) -> AsyncGenerator[StreamResponse, None]:
        plan = await make_plan()
        call: Any = None
        attempt = 0
        stats.started = time.monotonic()
        try:
            while True:  # retries, only until the first response
                attempt += 1
                try:
                    call = await self._open_stream(plan, stats)
                    response = await call.next(next_wait(stats, plan.waits))
                    break
                except (StreamError, StreamTimeoutError):
                    raise
                except Exception as exc:
                    if call is not None:
                        await call.cancel()
                        call = None
                    failure = classify(exc, self._context(plan.action))
                    await self._sleep(self._retry_delay(failure, exc, plan.action, attempt))
            while response is not None:
                stats.record()
                yield response
                if response.final:
                    return
                response = await call.next(next_wait(stats, plan.waits))
        except (StreamError, StreamTimeoutError) as exc:  # the stream's own signals (ClientErrors too)
            raise self._stream_failure(exc, plan, stats) from exc
        except ClientError:
            raise
        except Exception as exc:  # every failure is mapped here, once
            raise self._stream_failure(exc, plan, stats) from exc
        finally:
            if call is not None:
                # Shielded: when the task was cancelled, the cancel must still reach the server.
                await asyncio.shield(call.cancel())
