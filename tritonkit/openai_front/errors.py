"""The front's one error type: an OpenAI-shaped refusal of one request, with its HTTP status.

The class of a failure is the caller's guide: 4xx says *your request* was wrong (do not send it
again as it is), 5xx says the server failed (send it again later; 503 carries Retry-After). A
model that is down (its engine died, its stub process died, it is being reloaded, Triton is
gone) is a 503 ``server_error`` everywhere, never a 400.
"""

from __future__ import annotations

from typing import Any

from tritonkit.errors import (
    AuthenticationError,
    ClientError,
    EndpointUnreachableError,
    InferenceError,
    InputMismatchError,
    RequestTimeoutError,
    ServerUnavailableError,
    StreamStalledError,
    ThrottledError,
    TritonKitError,
)

__all__ = ["RETRY_AFTER_S", "OpenAIError", "error_of", "server_side"]

_BAD_REQUEST = ("400", "INVALID_ARGUMENT", "OUT_OF_RANGE", "FAILED_PRECONDITION")
_UNAVAILABLE = ("503", "UNAVAILABLE")

#: seconds a 503's Retry-After asks the caller to wait (a model reload takes about that long
#: for a Python stage, longer for an LLM engine: clients back off from there)
RETRY_AFTER_S = 5

#: what Triton and the stages say when the *server* failed, inside a gRPC stream (whose error
#: responses carry a message and no code): Triton's words for a model that is gone or whose
#: stub died, tritonkit's vllm backend's and NVIDIA's for a dead engine (lower case)
_SERVER_SIDE_WORDS = (
    "unavailable",
    "is not healthy",
    "unhealthy",
    "not ready",
    "unknown model",
    "has no available versions",
    "stub process",
    "shutting down",
    "engine died",
    "engine stopped",
)

#: HTTP status -> OpenAI's error ``type`` for it
_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
    499: "client_closed_request",
    500: "server_error",
    502: "upstream_error",
    503: "server_error",
    504: "timeout_error",
}


class OpenAIError(TritonKitError):
    """A request the front refuses or cannot answer; ``body()`` is OpenAI's error object.

    ``param`` names the request field at fault (``messages[1].content[0].image_url``), ``code`` a
    short machine-readable reason (``model_not_found``, ``invalid_api_key``...).
    """

    def __init__(
        self,
        message: str,
        *,
        status: int = 400,
        param: str | None = None,
        code: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.status = status
        self.param = param
        self.code = code

    @property
    def type(self) -> str:
        return _TYPES.get(self.status, "server_error" if self.status >= 500 else "invalid_request_error")

    @property
    def headers(self) -> dict[str, str]:
        """The response headers this error adds (Retry-After on a 503)."""
        return {"retry-after": str(RETRY_AFTER_S)} if self.status == 503 else {}

    def body(self) -> dict[str, Any]:
        text = self.message if not self.hint else f"{self.message} ({self.hint})"
        return {"error": {"message": text, "type": self.type, "param": self.param, "code": self.code}}


class AnswerCutShortError(OpenAIError):
    """The stream from Triton ended, without an error, before the engine's last piece: an engine
    that reports its finish reason marks its last piece with one, and none came. Tritonserver
    2.51's HTTP frontend was seen ending streams so under load; finishing the answer as if whole
    would hand the client a silently wrong one."""

    def __init__(self, model: str) -> None:
        super().__init__(
            f"the answer of model '{model}' ended before its last piece: the model server lost the "
            "rest of it; retry the request",
            status=502,
            code="answer_cut_short",
        )


def server_side(message: str) -> bool:
    """True when an in-stream error message says the server or model is down, not the request wrong."""
    text = message.lower()
    return any(word in text for word in _SERVER_SIDE_WORDS)


def error_of(exc: BaseException) -> OpenAIError:
    """Any failure as the OpenAI error the caller gets (Triton's refusal keeps its words)."""
    if isinstance(exc, OpenAIError):
        return exc
    if isinstance(exc, InputMismatchError):
        return OpenAIError(exc.message, status=400, code="invalid_input")
    if isinstance(exc, StreamStalledError):
        return OpenAIError(
            "the model stopped sending mid-answer; the request was cancelled: retry it",
            status=504,
            code="stream_stalled",
        )
    if isinstance(exc, RequestTimeoutError):
        return OpenAIError("the model did not answer in time", status=504, code="timeout")
    if isinstance(exc, ThrottledError):
        return OpenAIError("the model server is busy; retry later", status=429, code="rate_limited")
    if isinstance(exc, (EndpointUnreachableError, ServerUnavailableError)):
        return OpenAIError("the model server is not available", status=503, code="upstream_unavailable")
    if isinstance(exc, AuthenticationError):
        # the front's own credentials to Triton: not the caller's fault, and not theirs to see
        return OpenAIError(
            "the front could not authenticate to the model server", status=502, code="upstream_auth"
        )
    if isinstance(exc, InferenceError) and exc.status is None:
        # An error inside a gRPC stream (a message, no code): a model that is down says so in
        # Triton's or the backend's words; otherwise the model judged this request (bad image,
        # max_tokens past its limit...).
        if server_side(exc.message):
            return OpenAIError(exc.message, status=503, code="model_unavailable")
        return OpenAIError(exc.message, status=400, code="invalid_request")
    if isinstance(exc, ClientError):
        status = str(exc.status or "").removeprefix("StatusCode.")
        if status in _BAD_REQUEST:
            return OpenAIError(exc.message, status=400, code="invalid_request")
        if status in _UNAVAILABLE or status in ("404", "NOT_FOUND"):
            # the front found the model before it asked: NOT_FOUND now means it was unloaded
            return OpenAIError(exc.message, status=503, code="model_unavailable")
        return OpenAIError(exc.message, status=502, code="upstream_error")
    if isinstance(exc, TritonKitError):
        return OpenAIError(exc.message, status=500, code="server_error")
    return OpenAIError("internal error of the front (see its log)", status=500, code="server_error")
