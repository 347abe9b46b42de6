"""Typed ModelConfig layer over Triton's own protobuf schema.

``read_config``/``parse_config`` load ``config.pbtxt`` (ConfigParseError with file and line on
bad text), ``dumps_config``/``write_config`` write stable, diff-friendly text atomically, and
the frozen dataclasses in :mod:`tritonkit.config.types` build the fields people write most.
This package is the only place that imports ``tritonclient.grpc.model_config_pb2``.
"""

from __future__ import annotations

from tritonkit.config._proto import ModelConfig, new_config
from tritonkit.config.pbtxt import (
    FieldLocator,
    atomic_write_text,
    dumps_config,
    locate_fields,
    parse_config,
    read_config,
    write_config,
)
from tritonkit.config.types import (
    DataType,
    DynamicBatching,
    EnsembleStep,
    InstanceGroup,
    InstanceKind,
    ModelConfigSpec,
    QueuePolicy,
    TensorSpec,
    TimeoutAction,
    VersionPolicy,
    config_to_dict,
    data_type_name,
    merge_json,
)

__all__ = [
    "DataType",
    "DynamicBatching",
    "EnsembleStep",
    "FieldLocator",
    "InstanceGroup",
    "InstanceKind",
    "ModelConfig",
    "ModelConfigSpec",
    "QueuePolicy",
    "TensorSpec",
    "TimeoutAction",
    "VersionPolicy",
    "atomic_write_text",
    "config_to_dict",
    "data_type_name",
    "dumps_config",
    "locate_fields",
    "merge_json",
    "new_config",
    "parse_config",
    "read_config",
    "write_config",
]
