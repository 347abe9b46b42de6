"""The one bridge to Triton's protobuf schema (``tritonclient.grpc.model_config_pb2``).

Every other module reaches ModelConfig through ``tritonkit.config``; this keeps the schema
version in one place and lets the rest of the code stay free of generated-code imports.
"""

from __future__ import annotations

from typing import Any, TypeAlias

from google.protobuf import json_format, text_format
from tritonclient.grpc import model_config_pb2 as pb

#: A ``inference.ModelConfig`` protobuf message (the generated class has no type stubs).
ModelConfig: TypeAlias = Any

__all__ = [
    "ModelConfig",
    "json_format",
    "new_config",
    "pb",
    "text_format",
]


def new_config(**fields: Any) -> ModelConfig:
    """A fresh ``inference.ModelConfig`` message, optionally with top-level scalar fields set."""
    return pb.ModelConfig(**fields)
