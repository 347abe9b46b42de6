"""tritonkit: build, validate, serve, deploy and benchmark NVIDIA Triton model repositories.

The public surface is what ``__all__`` lists; everything else is private and may change.
Heavy optional parts (server, Azure ML, AKS, plots) are imported lazily by their modules.
"""

from __future__ import annotations

from tritonkit.errors import (
    AuthenticationError,
    AzureError,
    ClientError,
    ConfigError,
    ConfigParseError,
    DeployError,
    DeployValidationError,
    EndpointUnreachableError,
    InferenceError,
    InputMismatchError,
    KubernetesError,
    LoadError,
    MissingExtraError,
    ModelImportError,
    ModelLoadError,
    PerfError,
    RepositoryError,
    RequestTimeoutError,
    ServerError,
    ServerUnavailableError,
    SpecError,
    ThrottledError,
    TritonKitError,
    TuneError,
    ValidationError,
)

__version__ = "0.1.0"

__all__ = [
    "AuthenticationError",
    "AzureError",
    "ClientError",
    "ConfigError",
    "ConfigParseError",
    "DeployError",
    "DeployValidationError",
    "EndpointUnreachableError",
    "InferenceError",
    "InputMismatchError",
    "KubernetesError",
    "LoadError",
    "MissingExtraError",
    "ModelImportError",
    "ModelLoadError",
    "PerfError",
    "RepositoryError",
    "RequestTimeoutError",
    "ServerError",
    "ServerUnavailableError",
    "SpecError",
    "ThrottledError",
    "TritonKitError",
    "TuneError",
    "ValidationError",
    "__version__",
]
