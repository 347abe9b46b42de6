"""The front's one error type: an OpenAI-shaped refusal of one request, with its HTTP status."""

from __future__ import annotations

from typing import Any

from tritonkit.errors import TritonKitError

__all__ = ["OpenAIError"]

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
    503: "server_unavailable",
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

    def body(self) -> dict[str, Any]:
        text = self.message if not self.hint else f"{self.message} ({self.hint})"
        return {"error": {"message": text, "type": self.type, "param": self.param, "code": self.code}}
