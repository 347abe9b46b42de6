"""classify(): every foreign failure -> one ClientError subclass, retryable or not, secrets scrubbed.

Exceptions are tritonclient's own InferenceServerException and the standard library's, built
the way tritonclient builds them from HTTP responses and gRPC statuses.
"""

from __future__ import annotations

import ssl

import pytest
from tritonclient.utils import InferenceServerException

from tritonkit.client._errors import RETRY_AFTER_ATTR, CallContext, classify, read_refusal
from tritonkit.errors import (
    AuthenticationError,
    ClientError,
    EndpointUnreachableError,
    InferenceError,
    InputMismatchError,
    RequestTimeoutError,
    ServerUnavailableError,
    ThrottledError,
)

SECRET = "tok-9d8e7f6a5b4c3d2e"
CTX = CallContext(
    "https://gw.example.com:443", "inference on model 'm'", "static key from env AML_KEY", [SECRET]
)


def ise(status: str | None, msg: str = "reason") -> InferenceServerException:
    return InferenceServerException(msg=msg, status=status)


@pytest.mark.parametrize(
    ("status", "kind", "retryable"),
    [
        ("401", AuthenticationError, False),
        ("403", AuthenticationError, False),
        ("404", InferenceError, False),
        ("400", InferenceError, False),
        ("429", ThrottledError, True),
        ("502", ServerUnavailableError, True),
        ("503", ServerUnavailableError, True),
        ("504", ServerUnavailableError, True),
        ("500", InferenceError, False),
        ("StatusCode.UNAVAILABLE", ServerUnavailableError, True),
        ("StatusCode.UNAUTHENTICATED", AuthenticationError, False),
        ("StatusCode.PERMISSION_DENIED", AuthenticationError, False),
        ("StatusCode.DEADLINE_EXCEEDED", RequestTimeoutError, False),
        ("StatusCode.RESOURCE_EXHAUSTED", ThrottledError, True),
        ("StatusCode.INVALID_ARGUMENT", InferenceError, False),
        ("StatusCode.NOT_FOUND", InferenceError, False),
    ],
)
def test_classify_maps_status_to_client_error_when_server_refuses(
    status: str, kind: type[ClientError], retryable: bool
) -> None:
    failure = classify(ise(status), CTX)
    assert type(failure.error) is kind
    assert failure.retryable is retryable
    assert "inference on model 'm'" in failure.error.message


def test_classify_treats_grpc_restricted_protocol_as_auth_failure_when_status_is_unavailable() -> None:
    exc = ise(
        "StatusCode.UNAVAILABLE", "This protocol is restricted, expecting header 'triton-grpc-protocol-k'"
    )
    failure = classify(exc, CTX)
    assert isinstance(failure.error, AuthenticationError)
    assert not failure.retryable
    assert failure.error.hint and "RestrictedApiAuth" in failure.error.hint


def test_classify_names_credential_but_not_secret_when_auth_is_refused() -> None:
    failure = classify(ise("401", f"invalid token {SECRET}"), CTX)
    text = str(failure.error)
    assert "static key from env AML_KEY" in text and "refused (401)" in text
    assert SECRET not in text
    assert failure.error.status == "401"


@pytest.mark.parametrize("status", ["400", "StatusCode.NOT_FOUND"])
def test_classify_retries_when_triton_reports_model_without_available_versions(status: str) -> None:
    failure = classify(ise(status, "Request for unknown model: 'add' has no available versions"), CTX)
    assert isinstance(failure.error, ServerUnavailableError) and failure.retryable
    assert not classify(ise(status, "Request for unknown model: 'nope' is not found"), CTX).retryable


def test_classify_keeps_retry_after_when_http_transport_attached_it() -> None:
    exc = ise("429")
    setattr(exc, RETRY_AFTER_ATTR, 2.5)
    failure = classify(exc, CTX)
    assert failure.retry_after == 2.5 and failure.retryable


@pytest.mark.parametrize(
    ("exc", "kind", "retryable"),
    [
        (ConnectionRefusedError(111, "Connection refused"), EndpointUnreachableError, True),
        (ConnectionResetError(104, "reset by peer"), EndpointUnreachableError, True),
        (ise("StatusCode.UNAVAILABLE", "failed to connect to all addresses"), EndpointUnreachableError, True),
        (TimeoutError("timed out"), RequestTimeoutError, False),
        (ssl.SSLCertVerificationError("certificate verify failed"), EndpointUnreachableError, False),
        (ise(None, "unexpected response"), InferenceError, False),
        (ValueError("odd"), InferenceError, False),
    ],
)
def test_classify_maps_transport_failures_when_no_status_exists(
    exc: BaseException, kind: type[ClientError], retryable: bool
) -> None:
    failure = classify(exc, CTX)
    assert type(failure.error) is kind
    assert failure.retryable is retryable


def test_classify_passes_tritonkit_errors_through_unchanged_when_already_mapped() -> None:
    err = InputMismatchError("bad input")
    failure = classify(err, CTX)
    assert failure.error is err and not failure.retryable


@pytest.mark.parametrize(
    ("status", "kind", "retryable"),
    [("401", AuthenticationError, False), ("404", InferenceError, False), ("429", ThrottledError, True)],
)
def test_classify_uses_gateway_http_status_when_grpc_reports_one(
    status: str, kind: type[ClientError], retryable: bool
) -> None:
    code = {"401": "UNAUTHENTICATED", "404": "UNIMPLEMENTED", "429": "UNAVAILABLE"}[status]
    failure = classify(ise(f"StatusCode.{code}", f"Received http2 header with status: {status}"), CTX)
    assert type(failure.error) is kind and failure.retryable is retryable


def test_classify_hints_at_cacert_when_grpc_tls_handshake_fails() -> None:
    reason = "failed to connect to all addresses; Tls handshake failed: CERTIFICATE_VERIFY_FAILED"
    failure = classify(ise("StatusCode.UNAVAILABLE", reason), CTX)
    assert isinstance(failure.error, EndpointUnreachableError) and not failure.retryable
    assert failure.error.hint and "cacert" in failure.error.hint


def test_classify_hints_at_cacert_when_tls_verification_fails() -> None:
    failure = classify(ssl.SSLCertVerificationError("certificate verify failed"), CTX)
    assert failure.error.hint and "cacert" in failure.error.hint


@pytest.mark.parametrize(
    ("exc", "code", "auth", "missing", "connection"),
    [
        (InferenceServerException("denied", status="401"), "401", True, False, False),
        (
            InferenceServerException("nope", status="StatusCode.PERMISSION_DENIED"),
            "PERMISSION_DENIED",
            True,
            False,
            False,
        ),
        (InferenceServerException("Request for unknown model: 'm'", status="400"), "400", False, True, False),
        (InferenceServerException("x", status="StatusCode.UNAVAILABLE"), "UNAVAILABLE", False, False, True),
        (ConnectionRefusedError("refused"), "", False, False, True),
    ],
)
def test_read_refusal_reads_code_and_meaning_once_for_perf_and_tune(
    exc: BaseException, code: str, auth: bool, missing: bool, connection: bool
) -> None:
    refusal = read_refusal(exc)
    assert (refusal.code, refusal.auth, refusal.model_missing, refusal.connection) == (
        code,
        auth,
        missing,
        connection,
    )


def test_stream_and_raw_sender_errors_sit_in_the_tritonkit_error_tree() -> None:
    from tritonkit.client import _stream
    from tritonkit.errors import ClientError, RequestTimeoutError, StreamError, StreamTimeoutError
    from tritonkit.perf import _kstamp, _stream_sender
    from tritonkit.perf._http import HttpStatusError

    assert _stream.StreamError is StreamError is _stream_sender.StreamError is _kstamp.StampedStreamError
    assert _stream.StreamTimeoutError is StreamTimeoutError
    assert issubclass(StreamError, ClientError) and issubclass(StreamTimeoutError, RequestTimeoutError)
    assert StreamError("boom", kind="http 500").kind == "http 500"
    assert HttpStatusError(503).status == 503 and isinstance(HttpStatusError(503), ClientError)
