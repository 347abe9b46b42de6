"""Typed, frozen helpers for the ModelConfig fields people write most, converting to the proto.

Everything else in ModelConfig stays reachable through ``ModelConfigSpec.extra`` (protobuf JSON
form, merged into the message) or by editing the proto returned by ``to_proto()``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from tritonkit.config._proto import ModelConfig, json_format, new_config, pb
from tritonkit.errors import ConfigError

__all__ = [
    "DataType",
    "DynamicBatching",
    "EnsembleStep",
    "InstanceGroup",
    "InstanceKind",
    "ModelConfigSpec",
    "QueuePolicy",
    "TensorSpec",
    "TimeoutAction",
    "VersionPolicy",
    "data_type_name",
    "merge_json",
]


class DataType(str, enum.Enum):
    """Triton tensor data types, by their names without ``TYPE_`` (BYTES is TYPE_STRING)."""

    BOOL = "TYPE_BOOL"
    UINT8 = "TYPE_UINT8"
    UINT16 = "TYPE_UINT16"
    UINT32 = "TYPE_UINT32"
    UINT64 = "TYPE_UINT64"
    INT8 = "TYPE_INT8"
    INT16 = "TYPE_INT16"
    INT32 = "TYPE_INT32"
    INT64 = "TYPE_INT64"
    FP16 = "TYPE_FP16"
    FP32 = "TYPE_FP32"
    FP64 = "TYPE_FP64"
    BYTES = "TYPE_STRING"
    BF16 = "TYPE_BF16"

    @classmethod
    def parse(cls, value: str | DataType) -> DataType:
        """Accept ``FP32``, ``TYPE_FP32``, ``fp32``, ``BYTES`` or ``STRING``."""
        if isinstance(value, DataType):
            return value
        if not isinstance(value, str):
            raise ConfigError(f"data type must be a string such as 'FP32', got {value!r}")
        name = value.strip().upper()
        if name.startswith("TYPE_"):
            name = name[5:]
        if name == "STRING":
            name = "BYTES"
        try:
            return cls[name]
        except KeyError:
            known = ", ".join(m.name for m in cls)
            raise ConfigError(f"unknown data type {value!r}", hint=f"use one of: {known}") from None

    @property
    def proto_value(self) -> int:
        number: int = pb.DataType.Value(self.value)
        return number


def data_type_name(number: int) -> str:
    """Short Triton name (``FP32``, ``BYTES``) of a ``DataType`` enum number; ``INVALID`` if unset."""
    try:
        full: str = pb.DataType.Name(number)
    except ValueError:
        return f"UNKNOWN({number})"
    return "BYTES" if full == "TYPE_STRING" else full[5:]


class InstanceKind(str, enum.Enum):
    KIND_AUTO = "KIND_AUTO"
    KIND_GPU = "KIND_GPU"
    KIND_CPU = "KIND_CPU"
    KIND_MODEL = "KIND_MODEL"


class TimeoutAction(str, enum.Enum):
    REJECT = "REJECT"
    DELAY = "DELAY"


def _freeze(mapping: Mapping[Any, Any] | None) -> Mapping[Any, Any]:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True, kw_only=True)
class TensorSpec:
    """An input or output tensor: name, data type, dims (-1 = variable), optional reshape."""

    name: str
    data_type: DataType
    dims: tuple[int, ...]
    reshape: tuple[int, ...] | None = None
    optional: bool = False
    label_filename: str | None = None
    is_shape_tensor: bool = False
    allow_ragged_batch: bool = False

    def _message(self, message_type: Any, **flags: Any) -> Any:
        """A ModelInput or ModelOutput: name, type, dims, reshape, and the ``flags`` that are set."""
        msg = message_type(
            name=self.name,
            data_type=self.data_type.proto_value,
            dims=list(self.dims),
            **{key: value for key, value in flags.items() if value},
        )
        if self.reshape is not None:
            msg.reshape.shape.extend(self.reshape)
            msg.reshape.SetInParent()
        return msg

    def to_input(self) -> Any:
        return self._message(
            pb.ModelInput,
            optional=self.optional,
            is_shape_tensor=self.is_shape_tensor,
            allow_ragged_batch=self.allow_ragged_batch,
        )

    def to_output(self) -> Any:
        return self._message(
            pb.ModelOutput, label_filename=self.label_filename, is_shape_tensor=self.is_shape_tensor
        )


@dataclass(frozen=True, kw_only=True)
class QueuePolicy:
    timeout_action: TimeoutAction = TimeoutAction.REJECT
    default_timeout_microseconds: int = 0
    allow_timeout_override: bool = False
    max_queue_size: int = 0

    def fill(self, msg: Any) -> None:
        msg.timeout_action = pb.ModelQueuePolicy.TimeoutAction.Value(self.timeout_action.value)
        msg.default_timeout_microseconds = self.default_timeout_microseconds
        msg.allow_timeout_override = self.allow_timeout_override
        msg.max_queue_size = self.max_queue_size
        msg.SetInParent()


@dataclass(frozen=True, kw_only=True)
class DynamicBatching:
    preferred_batch_size: tuple[int, ...] = ()
    max_queue_delay_microseconds: int = 0
    preserve_ordering: bool = False
    priority_levels: int = 0
    default_priority_level: int = 0
    default_queue_policy: QueuePolicy | None = None
    priority_queue_policy: Mapping[int, QueuePolicy] = field(default_factory=lambda: _freeze(None))

    def fill(self, msg: Any) -> None:
        msg.SetInParent()
        msg.preferred_batch_size.extend(self.preferred_batch_size)
        msg.max_queue_delay_microseconds = self.max_queue_delay_microseconds
        msg.preserve_ordering = self.preserve_ordering
        msg.priority_levels = self.priority_levels
        msg.default_priority_level = self.default_priority_level
        if self.default_queue_policy is not None:
            self.default_queue_policy.fill(msg.default_queue_policy)
        for level in sorted(self.priority_queue_policy):
            self.priority_queue_policy[level].fill(msg.priority_queue_policy[level])


@dataclass(frozen=True, kw_only=True)
class InstanceGroup:
    kind: InstanceKind = InstanceKind.KIND_AUTO
    count: int = 1
    gpus: tuple[int, ...] = ()
    name: str = ""

    def fill(self, msg: Any) -> None:
        if self.name:
            msg.name = self.name
        msg.kind = pb.ModelInstanceGroup.Kind.Value(self.kind.value)
        msg.count = self.count
        msg.gpus.extend(self.gpus)


@dataclass(frozen=True, kw_only=True)
class VersionPolicy:
    """Exactly one of: latest ``num_versions``, ``all``, or ``specific`` versions."""

    latest: int | None = None
    all: bool = False
    specific: tuple[int, ...] = ()

    def fill(self, msg: Any) -> None:
        chosen = sum([self.latest is not None, self.all, bool(self.specific)])
        if chosen != 1:
            raise ConfigError(
                "version_policy must choose exactly one of latest, all, specific",
                hint="e.g. version_policy: {latest: {num_versions: 1}}",
            )
        if self.latest is not None:
            msg.latest.num_versions = self.latest
            msg.latest.SetInParent()
        elif self.all:
            msg.all.SetInParent()
        else:
            msg.specific.versions.extend(self.specific)


@dataclass(frozen=True, kw_only=True)
class EnsembleStep:
    """One ensemble step: ``input_map``/``output_map`` go member tensor name -> ensemble tensor."""

    model_name: str
    model_version: int = -1
    input_map: Mapping[str, str] = field(default_factory=lambda: _freeze(None))
    output_map: Mapping[str, str] = field(default_factory=lambda: _freeze(None))

    def fill(self, msg: Any) -> None:
        msg.model_name = self.model_name
        msg.model_version = self.model_version
        for key, value in self.input_map.items():
            msg.input_map[key] = value
        for key, value in self.output_map.items():
            msg.output_map[key] = value


@dataclass(frozen=True, kw_only=True)
class ModelConfigSpec:
    """The typed front of a ModelConfig; ``to_proto()`` gives the message Triton reads."""

    name: str
    platform: str = ""
    backend: str = ""
    max_batch_size: int = 0
    inputs: tuple[TensorSpec, ...] = ()
    outputs: tuple[TensorSpec, ...] = ()
    dynamic_batching: DynamicBatching | None = None
    instance_groups: tuple[InstanceGroup, ...] = ()
    version_policy: VersionPolicy | None = None
    parameters: Mapping[str, str] = field(default_factory=lambda: _freeze(None))
    ensemble_steps: tuple[EnsembleStep, ...] = ()
    default_model_filename: str = ""
    decoupled: bool = False  # model_transaction_policy { decoupled: true }: 0..n responses a request
    extra: Mapping[str, Any] = field(default_factory=lambda: _freeze(None))

    def to_proto(self) -> ModelConfig:
        cfg = new_config(name=self.name)
        if self.platform:
            cfg.platform = self.platform
        if self.backend:
            cfg.backend = self.backend
        cfg.max_batch_size = self.max_batch_size
        if self.version_policy is not None:
            self.version_policy.fill(cfg.version_policy)
        cfg.input.extend(t.to_input() for t in self.inputs)
        cfg.output.extend(t.to_output() for t in self.outputs)
        if self.dynamic_batching is not None:
            self.dynamic_batching.fill(cfg.dynamic_batching)
        for group in self.instance_groups:
            group.fill(cfg.instance_group.add())
        for key in sorted(self.parameters):
            cfg.parameters[key].string_value = str(self.parameters[key])
        if self.ensemble_steps:
            for step in self.ensemble_steps:
                step.fill(cfg.ensemble_scheduling.step.add())
        if self.default_model_filename:
            cfg.default_model_filename = self.default_model_filename
        if self.decoupled:
            cfg.model_transaction_policy.decoupled = True
        if self.extra:
            merge_json(cfg, self.extra, where=f"model '{self.name}' extra")
        return cfg


def merge_json(cfg: ModelConfig, data: Mapping[str, Any], *, where: str) -> None:
    """Merge protobuf-JSON ``data`` (any ModelConfig field) into ``cfg``; clear error if wrong."""
    try:
        json_format.ParseDict(dict(data), cfg, ignore_unknown_fields=False)
    except json_format.ParseError as exc:
        raise ConfigError(
            f"{where}: {exc}",
            hint="'extra' takes ModelConfig fields in protobuf JSON form (model_config.proto)",
        ) from exc


def config_to_dict(cfg: ModelConfig) -> dict[str, Any]:
    """The config as protobuf JSON (field names as in the .proto)."""
    data: dict[str, Any] = json_format.MessageToDict(cfg, preserving_proto_field_name=True)
    return data


def sequence_of_ints(value: Any, *, what: str) -> tuple[int, ...]:
    """Validate a list of ints from YAML (bools are not ints here)."""
    if not isinstance(value, Sequence) or isinstance(value, str | bytes):
        raise ConfigError(f"{what} must be a list of integers, got {value!r}")
    out: list[int] = []
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int):
            raise ConfigError(f"{what} must be a list of integers, got {value!r}")
        out.append(item)
    return tuple(out)
