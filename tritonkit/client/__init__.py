"""Authenticated Triton client: auth providers, retries, numpy in and out, over HTTP or gRPC;
streamed responses of decoupled models (gRPC streaming or HTTP generate_stream); ``llm_inputs``
builds a request to an LLM stage (vLLM backend)."""

from typing import TYPE_CHECKING

from tritonkit._lazy import lazy_exports

if TYPE_CHECKING:
    from tritonkit.client._async_client import AsyncTritonClient
    from tritonkit.client._client import TritonClient
    from tritonkit.client._inputs import ModelInfo, TensorInfo
    from tritonkit.client._llm import LLM_OUTPUTS, llm_inputs, sampling_json
    from tritonkit.client._stream import AsyncResponseStream, ResponseStream, StreamResponse, StreamStats
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

# The names imported above load on first use: importing one module of the package costs only its
# own floor.
__getattr__, __dir__ = lazy_exports(__name__, __file__)

__all__ = [
    "LLM_OUTPUTS",
    "NO_RETRY",
    "AmlTokenAuth",
    "AsyncResponseStream",
    "AsyncTritonClient",
    "AuthProvider",
    "CombinedAuth",
    "DeploymentRouting",
    "Endpoint",
    "EntraIdAuth",
    "KeyAuth",
    "ModelInfo",
    "ResponseStream",
    "RestrictedApiAuth",
    "RetryPolicy",
    "Secret",
    "StreamResponse",
    "StreamStats",
    "TensorInfo",
    "TritonClient",
    "llm_inputs",
    "parse_url",
    "sampling_json",
]
