"""What TritonClient and AsyncTritonClient share: their settings, the headers and credential
each call carries, how a failure is described and whether it is retried, and how a request
(single or streamed) is checked and planned before anything is sent."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from tritonkit.client._errors import CallContext, Failure, classify
from tritonkit.client._inputs import ModelInfo, PreparedInput, prepare, prepare_fast, split
from tritonkit.client._stream import (
    ParamValue,
    StreamError,
    StreamPlan,
    StreamStats,
    StreamTimeoutError,
    StreamWaits,
    generate_body,
    stream_failure,
)
from tritonkit.client._stream_grpc import grpc_request
from tritonkit.client._stream_transport import _StreamTransportBase
from tritonkit.client._transport import _TransportBase
from tritonkit.client.auth import AuthProvider, CombinedAuth, DeploymentRouting, for_protocol, secrets_of
from tritonkit.client.endpoint import Endpoint, parse_url
from tritonkit.client.retry import RetryPolicy
from tritonkit.errors import ClientError, InferenceError, InputMismatchError
from tritonkit.kinds.names import is_vllm

logger = logging.getLogger(__name__)

_Transport = TypeVar("_Transport", bound=_TransportBase)
_Streams = TypeVar("_Streams", bound=_StreamTransportBase)

_SECRET_HEADER_WORDS = ("authorization", "key", "token", "secret", "password", "triton-grpc-protocol")


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
        self._rand: Callable[[], float] = random.Random().random  # not the global state: the caller's
        self._setup()

    def _setup(self) -> None:
        """Create the transports (subclasses, with :meth:`_transports`)."""
        raise NotImplementedError

    def _transports(
        self, transport: type[_Transport], streams: type[_Streams]
    ) -> tuple[_Transport, _Streams]:
        """The flavour's request and stream transports, with this client's endpoint and TLS."""
        connect, cacert, insecure = self.connect_timeout, self.cacert, self.insecure
        requests = transport(
            self.endpoint,
            connect_timeout=connect,
            request_timeout=self.request_timeout,
            cacert=cacert,
            insecure=insecure,
        )
        return requests, streams(self.endpoint, connect_timeout=connect, cacert=cacert, insecure=insecure)

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

    def _remember(self, model: str, version: str, meta: dict[str, Any], cfg: dict[str, Any]) -> ModelInfo:
        """Cache the model information read from ``meta`` and ``cfg`` (see :meth:`forget`)."""
        info = self._models[(model, version)] = ModelInfo.from_metadata(meta, cfg, version=version)
        return info

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

    def _infer_plan(
        self,
        info: ModelInfo,
        model: str,
        inputs: Mapping[str, Any] | None,
        named: Mapping[str, Any],
        outputs: Sequence[str] | None,
    ) -> tuple[list[list[PreparedInput]], Sequence[str]]:
        """The requests one ``infer()`` sends (at most ``max_batch_size`` each) and the outputs
        they ask for; both flavours send them, each with its own I/O.

        A decoupled model is refused (it answers with a stream). Checked numpy batches that fit in
        one request take the hot path (see prepare_fast).
        """
        if info.decoupled:
            raise self._decoupled_error(model, info)
        if inputs is None and outputs is None:
            fast = prepare_fast(info, named)
            if fast is not None and fast[1] <= info.max_batch_size:
                return [fast[0]], info.output_names
        return self._prepare(info, model, inputs, named), self._outputs(info, outputs)

    # -- streaming -------------------------------------------------------------------------------
    @staticmethod
    def _decoupled_error(model: str, info: ModelInfo) -> InferenceError:
        message = (
            f"model '{model}' is decoupled (model_transaction_policy): it answers with a stream of "
            "responses, which infer() cannot receive (Triton refuses it: HTTP 501 / gRPC UNIMPLEMENTED)"
        )
        if is_vllm(info.backend):
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
    ) -> StreamPlan:
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
        return StreamPlan(
            model, version, info, wanted, payload, waits, f"streamed inference on model '{model}'"
        )

    def _waits(self, first: float | None, gap: float | None, total: float | None) -> StreamWaits:
        return StreamWaits(
            self.request_timeout if first is None else first,
            self.request_timeout if gap is None else gap,
            total,
        )

    def _stream_retry_delay(self, exc: Exception, plan: StreamPlan, attempt: int) -> float:
        """The wait before opening a stream again after it failed before its first response;
        raises instead when it may not be retried (an error or a wait of the stream itself goes
        on, unchanged, to :meth:`_stream_failure`)."""
        if isinstance(exc, (StreamError, StreamTimeoutError)):
            raise exc
        failure = classify(exc, self._context(plan.action))
        return self._retry_delay(failure, exc, plan.action, attempt)

    def _stream_failure(self, exc: Exception, plan: StreamPlan, stats: StreamStats) -> ClientError:
        """The error that ends a stream; a ClientError raised on purpose is returned as it is."""
        if isinstance(exc, ClientError) and not isinstance(exc, (StreamError, StreamTimeoutError)):
            return exc
        return stream_failure(exc, self._context(plan.action), stats, plan.waits)

    def _end_stream(self, exc: Exception, plan: StreamPlan, stats: StreamStats) -> NoReturn:
        """Raise what ends a stream that failed with ``exc`` (every failure is mapped here, once)."""
        error = self._stream_failure(exc, plan, stats)
        if error is exc:
            raise exc
        raise error from exc
