"""Authenticated Triton client: auth providers, retries, numpy in and out, over HTTP or gRPC."""

from tritonkit.client._client import AsyncTritonClient, TritonClient
from tritonkit.client._inputs import ModelInfo
from tritonkit.client.auth import (
    AmlTokenAuth,
    AuthProvider,
    CombinedAuth,
    DeploymentRouting,
    EntraIdAuth,
    KeyAuth,
    RestrictedApiAuth,
    Secret,
)
from tritonkit.client.endpoint import Endpoint, parse_url
from tritonkit.client.retry import NO_RETRY, RetryPolicy

__all__ = [
    "NO_RETRY",
    "AmlTokenAuth",
    "AsyncTritonClient",
    "AuthProvider",
    "CombinedAuth",
    "DeploymentRouting",
    "Endpoint",
    "EntraIdAuth",
    "KeyAuth",
    "ModelInfo",
    "RestrictedApiAuth",
    "RetryPolicy",
    "Secret",
    "TritonClient",
    "parse_url",
]
