"""The tritonkit exception tree.

Library code raises only these; each foreign library's errors are mapped once, at its
boundary, with ``raise ... from exc``. The CLI turns any ``TritonKitError`` into a clean
message and exit code 1.

    TritonKitError
    ├── MissingExtraError          an optional dependency is not installed (names the extra)
    ├── ConfigError                a config.pbtxt or pipeline spec is wrong
    │   ├── ConfigParseError       text that does not parse (file, line, column)
    │   └── SpecError              a pipeline spec (YAML) that is not valid
    ├── ModelImportError           a model file (ONNX, Python) that cannot be read
    ├── RepositoryError            layout problems, unsafe paths, refused overwrites
    ├── ValidationError            a repository failed static validation (holds the problems)
    ├── ServerError                the local tritonserver could not start or stopped
    │   ├── ModelLoadError         Triton refused to load a model (names it, gives Triton's reason)
    │   └── StubEnvironmentError   the Python stages' environment would serve broken answers (numpy 2...)
    ├── ClientError                calling a Triton endpoint failed
    │   ├── EndpointUnreachableError   connection refused / DNS / TLS handshake
    │   ├── RequestTimeoutError        connect or request timeout
    │   │   ├── StreamTimeoutError     a streamed response did not come within its wait (internal)
    │   │   └── StreamStalledError     a stream that started went silent past its idle limit (also
    │   │                              a ServerUnavailableError: the server's side stalled)
    │   ├── AuthenticationError        401/403, restricted-API refusal (names the credential only)
    │   ├── ThrottledError             429 after all retries
    │   ├── ServerUnavailableError     502/503/504 or gRPC UNAVAILABLE after all retries
    │   │   └── StreamCutShortError    a composed answer ended without the engine's last piece
    │   ├── InputMismatchError         inputs that do not match the model's metadata
    │   ├── InferenceError             any other refused request (4xx/5xx, gRPC status)
    │   ├── StreamError                an error the server sent inside a stream (``kind`` names it)
    │   └── HttpStatusError            perf's raw HTTP sender got a non-200 answer (tritonkit.perf._http)
    ├── PerfError                  a benchmark could not run or its inputs are wrong
    │   └── LoadError              a load level or duration that does not parse (also a TuneError)
    ├── TuneError                  a tuning run's space, settings or endpoint is wrong
    └── DeployError                deploying to Azure ML or AKS failed
        ├── DeployValidationError  caught before any network call
        ├── AzureError             an Azure ML call failed (auth, quota, missing workspace...)
        └── KubernetesError        a Kubernetes call failed or no cluster is reachable
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar

_P = TypeVar("_P")


class TritonKitError(Exception):
    """Base of every error tritonkit raises on purpose.

    ``hint`` says what to do about it; the CLI prints it under the message.
    """

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message}\n  hint: {self.hint}"
        return self.message


class MissingExtraError(TritonKitError):
    """An optional dependency is missing; says which extra installs it."""

    def __init__(self, *, package: str, extra: str, feature: str) -> None:
        super().__init__(
            f"{feature} needs the '{package}' package, which is not installed.",
            hint=f"pip install 'tritonkit[{extra}]'",
        )
        self.package = package
        self.extra = extra


class ConfigError(TritonKitError):
    """A configuration (config.pbtxt, pipeline spec) is wrong.

    ``file``, ``line`` and ``column`` say where; the message starts with ``file:line:`` (the
    column is kept for tools, a parse error's only).
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | Path | None = None,
        line: int | None = None,
        column: int | None = None,
        hint: str | None = None,
    ) -> None:
        where = ""
        if file is not None:
            where = f"{file}:{line}: " if line is not None else f"{file}: "
        super().__init__(f"{where}{message}", hint=hint)
        self.file = str(file) if file is not None else None
        self.line = line
        self.column = column


class ConfigParseError(ConfigError):
    """A config.pbtxt that does not parse as Triton's ModelConfig (``column`` where it stopped)."""


class SpecError(ConfigError):
    """A pipeline spec (YAML) that is not valid."""


class ModelImportError(TritonKitError):
    """A model file that cannot be read (corrupt ONNX, missing Python entry point...)."""


class RepositoryError(TritonKitError):
    """A model repository problem: layout, unsafe paths, refused overwrites."""


class _ProblemsError(TritonKitError, Generic[_P]):
    """An error that carries every problem found (``problems``), not only the first."""

    def __init__(self, message: str, *, problems: Sequence[_P] = (), hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.problems: list[_P] = list(problems)


class ValidationError(_ProblemsError[Any]):
    """A repository failed static validation (``problems``: the validator's findings)."""


class ServerError(TritonKitError):
    """The local tritonserver could not start, or stopped unexpectedly."""

    def __init__(self, message: str, *, log_tail: str | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.log_tail = log_tail


class ModelLoadError(ServerError):
    """Triton refused to load a model."""

    def __init__(self, model: str, reason: str, *, log_tail: str | None = None) -> None:
        super().__init__(
            f"Triton failed to load model '{model}': {reason}",
            log_tail=log_tail,
            hint="fix the model's config.pbtxt or files (try `tritonkit validate`) and start again",
        )
        self.model = model
        self.reason = reason


class StubEnvironmentError(ServerError):
    """The Python stages' environment (numpy, Python version, libpython) would serve broken answers."""


class ClientError(TritonKitError):
    """Calling a Triton endpoint failed."""

    def __init__(self, message: str, *, status: int | str | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.status = status


class EndpointUnreachableError(ClientError):
    """The endpoint could not be reached (connection refused, DNS, TLS handshake)."""


class RequestTimeoutError(ClientError):
    """A connect or request timeout expired."""


class AuthenticationError(ClientError):
    """The endpoint refused the credential (never includes the secret itself)."""


class ThrottledError(ClientError):
    """The endpoint kept answering 429 Too Many Requests."""


class ServerUnavailableError(ClientError):
    """The endpoint kept answering 502/503/504 or gRPC UNAVAILABLE."""


class InputMismatchError(ClientError):
    """Inputs that do not match the model's metadata (name, data type, shape)."""


class InferenceError(ClientError):
    """Any other refused inference request."""


class StreamTimeoutError(RequestTimeoutError):
    """No streamed response within the wait the client allowed (``which``: "wait" or "total").

    Internal to the client: ``client._stream.stream_failure`` turns it into a
    ``RequestTimeoutError`` whose message says which wait ran out and after how many responses.
    """

    def __init__(self, which: str) -> None:
        super().__init__(which)
        self.which = which


class StreamStalledError(RequestTimeoutError, ServerUnavailableError):
    """A stream that had sent pieces sent none for its idle limit (``response_timeout``): the
    server's side stalled (a wedged engine, a lost response), not the caller's request. The stream
    is cancelled on the server when this is raised; it is both a timeout and UNAVAILABLE, so
    retry policies and callers that handle either see it."""


class StreamCutShortError(ServerUnavailableError):
    """A streamed answer that ended without the engine's last piece: the stage was asked for its
    finish reason, which marks that piece, and none came, so the server's side lost the answer's
    tail (tritonserver 2.51's HTTP frontend does, under load). Raised after the pieces that came,
    so a caller never takes a shortened answer for a whole one."""


class StreamError(ClientError):
    """An error the server sent inside a stream (gRPC ``error_message``, SSE ``{"error": ...}``),
    or a stream the server refused or cut short.

    ``kind`` is a short, stable name for it (the load generator counts errors by kind). The
    client turns it into an ``InferenceError`` that says after how many responses it came.
    """

    def __init__(self, message: str, *, kind: str = "stream error") -> None:
        super().__init__(message)
        self.kind = kind


class PerfError(TritonKitError):
    """A benchmark could not run, or its inputs are wrong."""


class TuneError(TritonKitError):
    """A tuning run cannot go on: bad search space, settings, or an endpoint without model control."""


class LoadError(PerfError, TuneError):
    """A load level or duration that does not parse (`perf` and `tune` share the grammar)."""


class DeployError(TritonKitError):
    """Deploying to Azure ML or AKS failed."""


class DeployValidationError(_ProblemsError[str], DeployError):
    """A deployment that would fail, caught before any network call (``problems``: each rule broken)."""


class AzureError(DeployError):
    """An Azure ML call failed."""


class KubernetesError(DeployError):
    """A Kubernetes call failed, or no cluster is reachable."""
