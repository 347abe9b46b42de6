"""The one place where tritonclient's (and its transports') exceptions become tritonkit errors.

:func:`classify` turns any exception raised while talking to an endpoint into a
:class:`Failure`: the ``ClientError`` subclass to raise, whether the failure is transient
(worth a retry) and the server's ``Retry-After``. Secret values are scrubbed from all text.
"""

from __future__ import annotations

import asyncio
import re
import ssl
from collections.abc import Sequence
from dataclasses import dataclass

from tritonkit.client.auth import redact
from tritonkit.client.retry import RETRY_STATUSES
from tritonkit.errors import (
    AuthenticationError,
    ClientError,
    EndpointUnreachableError,
    InferenceError,
    RequestTimeoutError,
    ServerUnavailableError,
    ThrottledError,
    TritonKitError,
)

#: Attribute our HTTP transports set on tritonclient exceptions to carry Retry-After.
RETRY_AFTER_ATTR = "tritonkit_retry_after"

_GRPC_AUTH = {"UNAUTHENTICATED", "PERMISSION_DENIED"}
_CONNECTION_CLASS_NAMES = {
    "HTTPConnectionClosed",
    "HTTPParseError",
    "HTTPProtocolViolationError",
    "ClientConnectionError",
    "ClientConnectorError",
    "ServerDisconnectedError",
    "ClientOSError",
    "ClientPayloadError",
    # httpx (server-sent events of generate_stream)
    "ConnectError",
    "ReadError",
    "WriteError",
    "CloseError",
    "RemoteProtocolError",
}
#: Triton's words for "this model exists but is not loaded right now" (a server draining on
#: shutdown, or loading on start). HTTP says 400 and gRPC NOT_FOUND/UNAVAILABLE; it is transient.
_MODEL_UNAVAILABLE = ("has no available versions", "is not ready", "is not loaded")
_TIMEOUT_CLASS_NAMES = {
    "Timeout",
    "ServerTimeoutError",
    "ConnectionTimeoutError",
    "SocketTimeoutError",
    "ConnectTimeout",  # httpx
    "ReadTimeout",
    "WriteTimeout",
    "PoolTimeout",
}
#: Triton's refusal of a decoupled model on a unary path (HTTP 501, gRPC UNIMPLEMENTED).
_DECOUPLED = "decoupled transaction policy"


@dataclass(frozen=True)
class CallContext:
    """What a failure message needs to say: which call, where, with which credential."""

    endpoint: str
    action: str
    credential: str | None = None
    secrets: Sequence[str] = ()


@dataclass(frozen=True)
class Failure:
    error: ClientError
    retryable: bool
    retry_after: float | None = None


def _status_of(exc: BaseException) -> str | None:
    status = getattr(exc, "status", None)
    value = status() if callable(status) else status
    return None if value is None else str(value)


def _message_of(exc: BaseException) -> str:
    message = getattr(exc, "message", None)
    text = message() if callable(message) else None
    return str(text) if text else str(exc)


_AUTH_CODES = ("401", "403", "UNAUTHENTICATED", "PERMISSION_DENIED")


@dataclass(frozen=True)
class Refusal:
    """A failed control call (metadata, config, statistics, model load) as tritonclient raised it,
    read once: the status code without gRPC's ``StatusCode.`` prefix ("" when there is none), the
    server's reason, and what they mean. Callers that word their own message (perf's set-up,
    tune's model control) decide on these facts instead of reading the exception again."""

    code: str
    reason: str
    os_error: bool = False

    @property
    def auth(self) -> bool:
        """401/403 or gRPC UNAUTHENTICATED/PERMISSION_DENIED: a credential problem."""
        return self.code in _AUTH_CODES

    @property
    def model_missing(self) -> bool:
        """404/NOT_FOUND, or Triton's 'unknown model' / 'not found' words."""
        lowered = self.reason.lower()
        return self.code in ("404", "NOT_FOUND") or "unknown model" in lowered or "not found" in lowered

    @property
    def connection(self) -> bool:
        """An OS-level socket error or gRPC UNAVAILABLE: the server was not reached."""
        return self.os_error or self.code == "UNAVAILABLE"


def read_refusal(exc: BaseException) -> Refusal:
    """What ``exc`` (any exception from a tritonclient call) says, as a :class:`Refusal`."""
    status = getattr(exc, "status", None)
    code = str(status() if callable(status) else status or "").removeprefix("StatusCode.")
    message = getattr(exc, "message", None)
    reason = str(message() if callable(message) else exc)
    return Refusal(code=code, reason=reason, os_error=isinstance(exc, OSError))


def _auth_error(ctx: CallContext, status: str, reason: str) -> AuthenticationError:
    used = ctx.credential or "no credential (no auth= and no Authorization header)"
    if "restricted" in reason.lower():
        hint = (
            "this Triton API is restricted: pass RestrictedApiAuth(KEY, env=VAR) "
            "(CLI: --restricted-header KEY=ENVVAR) with the value the server was started with"
        )
    elif ctx.credential:
        hint = (
            "the credential was refused: check it is current (keys rotate, tokens expire), belongs to "
            "this endpoint, and that your identity has access to it"
        )
    else:
        hint = "pass a credential: auth=KeyAuth(env='ENDPOINT_KEY') (CLI: --key-env ENDPOINT_KEY)"
    return AuthenticationError(
        f"{ctx.action} at {ctx.endpoint} was refused ({status}): {reason}; credential used: {used}",
        status=status,
        hint=hint,
    )


def _from_http_status(
    code: int, status: str, reason: str, ctx: CallContext, retry_after: float | None
) -> Failure:
    where = f"{ctx.action} at {ctx.endpoint}"
    if code in (401, 403):
        return Failure(_auth_error(ctx, status, reason), False)
    if code == 429:
        return Failure(
            ThrottledError(
                f"{where} was refused (429 Too Many Requests): {reason}",
                status=code,
                hint="the endpoint is throttling: send fewer concurrent requests or raise its capacity",
            ),
            True,
            retry_after,
        )
    if code in RETRY_STATUSES:
        return Failure(
            ServerUnavailableError(
                f"{where} was refused ({code}, server unavailable): {reason}",
                status=code,
                hint="the server or gateway is starting, restarting or overloaded; try again later",
            ),
            True,
            retry_after,
        )
    if code == 404:
        hint = (
            "check the model name and version; behind Azure ML also the deployment name "
            "(azureml-model-deployment header, CLI --deployment)"
        )
    elif 400 <= code < 500:
        hint = "the server rejected the request as invalid; its reason is above"
    else:
        hint = "the server failed to run the request; see its reason above and the server log"
    return Failure(InferenceError(f"{where} was refused ({code}): {reason}", status=code, hint=hint), False)


_HTTP2_STATUS = re.compile(r"http2 header with status: (\d{3})")
_TLS_WORDS = ("CERTIFICATE_VERIFY_FAILED", "Tls handshake failed", "Handshake failed")


def _from_grpc_status(code: str, reason: str, ctx: CallContext) -> Failure:
    where = f"{ctx.action} at {ctx.endpoint}"
    gateway_status = _HTTP2_STATUS.search(reason)
    if gateway_status:
        # A gateway (nginx, Azure front door) answered with an HTTP status instead of a gRPC one.
        return _from_http_status(int(gateway_status.group(1)), gateway_status.group(1), reason, ctx, None)
    if any(words in reason for words in _TLS_WORDS):
        return Failure(
            EndpointUnreachableError(
                f"{where} failed: TLS error ({reason})",
                status=code,
                hint="for a private CA pass cacert=PATH (CLI --cacert FILE); check the host name matches "
                "the certificate",
            ),
            False,
        )
    if code in _GRPC_AUTH or (code == "UNAVAILABLE" and "restricted" in reason.lower()):
        # Triton answers a missing restricted-protocol header with UNAVAILABLE: not transient.
        return Failure(_auth_error(ctx, code, reason), False)
    if code == "UNAVAILABLE":
        lowered = reason.lower()
        if any(w in lowered for w in ("connect", "refused", "reset", "socket closed")):
            err: ClientError = EndpointUnreachableError(
                f"{where} failed: cannot connect ({reason})",
                status=code,
                hint="check the address and that the server is running",
            )
        else:
            err = ServerUnavailableError(
                f"{where} was refused (gRPC UNAVAILABLE): {reason}",
                status=code,
                hint="the server is starting, restarting or overloaded; try again later",
            )
        return Failure(err, True)
    if code == "DEADLINE_EXCEEDED":
        return Failure(
            RequestTimeoutError(
                f"{where} timed out (gRPC DEADLINE_EXCEEDED): {reason}",
                status=code,
                hint="raise request_timeout (CLI --timeout) or check the server load",
            ),
            False,
        )
    if code == "RESOURCE_EXHAUSTED":
        return Failure(
            ThrottledError(f"{where} was refused (gRPC RESOURCE_EXHAUSTED): {reason}", status=code),
            True,
        )
    hint = "check the model name, version and inputs" if code in ("NOT_FOUND", "INVALID_ARGUMENT") else None
    return Failure(
        InferenceError(f"{where} was refused (gRPC {code}): {reason}", status=code, hint=hint), False
    )


def classify(exc: BaseException, ctx: CallContext) -> Failure:
    """Map ``exc`` to the ClientError to raise, and whether to retry it."""
    if isinstance(exc, ClientError):
        return Failure(exc, False)
    if isinstance(exc, TritonKitError):
        return Failure(ClientError(exc.message, hint=exc.hint), False)
    reason = redact(_message_of(exc), ctx.secrets)
    status = _status_of(exc)
    retry_after = getattr(exc, RETRY_AFTER_ATTR, None)
    if status is not None and any(words in reason for words in _MODEL_UNAVAILABLE):
        return Failure(
            ServerUnavailableError(
                f"{ctx.action} at {ctx.endpoint} was refused ({status}, model not available now): {reason}",
                status=status,
                hint="the server is loading or unloading the model (starting, draining, restarting); "
                "try again, or check the server log if it lasts",
            ),
            True,
            retry_after,
        )
    if status is not None and _DECOUPLED in reason:
        return Failure(
            InferenceError(
                f"{ctx.action} at {ctx.endpoint} was refused ({status}): {reason}",
                status=status,
                hint="the model is decoupled (it streams its answer): use client.stream(model, ...) "
                "(CLI: tritonkit infer --stream)",
            ),
            False,
        )
    if status is not None:
        if status.isdigit():
            return _from_http_status(int(status), status, reason, ctx, retry_after)
        if status.startswith("StatusCode."):
            return _from_grpc_status(status.split(".", 1)[1], reason, ctx)
    where = f"{ctx.action} at {ctx.endpoint}"
    name = type(exc).__name__
    # httpx wraps a failed certificate check in its ConnectError: not worth a retry either.
    wrapped_tls = name in _CONNECTION_CLASS_NAMES and any(words in reason for words in _TLS_WORDS)
    if isinstance(exc, ssl.SSLError) or wrapped_tls:
        return Failure(
            EndpointUnreachableError(
                f"{where} failed: TLS error ({reason})",
                hint="for a private CA pass cacert=PATH (CLI --cacert FILE); check the host name matches "
                "the certificate",
            ),
            False,
        )
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)) or name in _TIMEOUT_CLASS_NAMES:
        return Failure(
            RequestTimeoutError(
                f"{where} timed out ({name})",
                hint="raise request_timeout / connect_timeout (CLI --timeout) or check the server load",
            ),
            False,
        )
    if isinstance(exc, (ConnectionError, OSError)) or name in _CONNECTION_CLASS_NAMES:
        return Failure(
            EndpointUnreachableError(
                f"{where} failed: cannot connect ({name}: {reason})",
                hint="check the address and that the server is running",
            ),
            True,
        )
    if status is None and name == "InferenceServerException":
        # tritonclient raised it locally (bad argument, undecodable response...).
        return Failure(InferenceError(f"{where} failed: {reason}"), False)
    return Failure(InferenceError(f"{where} failed: {name}: {reason}"), False)
