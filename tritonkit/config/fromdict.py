"""Typed config objects from plain mappings (the YAML shapes of the pipeline spec format).

Each function raises ConfigError naming the field (``where``) and what it expected, so a spec
loader can add the file name and turn it into a SpecError.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tritonkit.config.types import (
    DataType,
    DynamicBatching,
    EnsembleStep,
    InstanceGroup,
    InstanceKind,
    QueuePolicy,
    TensorSpec,
    TimeoutAction,
    VersionPolicy,
    sequence_of_ints,
)
from tritonkit.errors import ConfigError

__all__ = [
    "dynamic_batching_from_dict",
    "ensemble_step_from_dict",
    "instance_group_from_dict",
    "tensor_from_dict",
    "version_policy_from_dict",
]


def _mapping(value: Any, *, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where} must be a mapping, got {type(value).__name__}")
    return value


def _check_keys(data: Mapping[str, Any], allowed: set[str], *, where: str) -> None:
    unknown = sorted(str(k) for k in data if k not in allowed)
    if unknown:
        raise ConfigError(
            f"{where}: unknown key(s) {', '.join(unknown)}",
            hint=f"allowed keys: {', '.join(sorted(allowed))}",
        )


def _int(value: Any, *, where: str, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{where} must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise ConfigError(f"{where} must be >= {minimum}, got {value}")
    return value


def _bool(value: Any, *, where: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{where} must be true or false, got {value!r}")
    return value


def _str(value: Any, *, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where} must be a non-empty string, got {value!r}")
    return value


_TENSOR_KEYS = {
    "name",
    "data_type",
    "dims",
    "reshape",
    "optional",
    "labels",
    "label_filename",
    "is_shape_tensor",
    "allow_ragged_batch",
}


def tensor_from_dict(data: Any, *, where: str) -> TensorSpec:
    """``{name, data_type, dims, reshape?, optional?, labels?}`` -> TensorSpec.

    ``labels`` is the label file path as written in a spec; only its file name lands in the
    config (``label_filename``), the builder copies the file.
    """
    d = _mapping(data, where=where)
    _check_keys(d, _TENSOR_KEYS, where=where)
    name = _str(d.get("name"), where=f"{where}.name")
    where = f"{where} ({name})"
    if "data_type" not in d:
        raise ConfigError(f"{where}: missing data_type", hint="e.g. data_type: FP32")
    try:
        dtype = DataType.parse(d["data_type"])
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc.message}", hint=exc.hint) from exc
    if "dims" not in d:
        raise ConfigError(f"{where}: missing dims", hint="e.g. dims: [3, 224, 224] (-1 = variable)")
    dims = sequence_of_ints(d["dims"], what=f"{where}.dims")
    reshape = sequence_of_ints(d["reshape"], what=f"{where}.reshape") if "reshape" in d else None
    labels = d.get("label_filename", d.get("labels"))
    label_name = None
    if labels is not None:
        label_name = _str(labels, where=f"{where}.labels").replace("\\", "/").rsplit("/", 1)[-1]
    return TensorSpec(
        name=name,
        data_type=dtype,
        dims=dims,
        reshape=reshape,
        optional=_bool(d.get("optional", False), where=f"{where}.optional"),
        label_filename=label_name,
        is_shape_tensor=_bool(d.get("is_shape_tensor", False), where=f"{where}.is_shape_tensor"),
        allow_ragged_batch=_bool(d.get("allow_ragged_batch", False), where=f"{where}.allow_ragged_batch"),
    )


_QUEUE_KEYS = {"timeout_action", "default_timeout_microseconds", "allow_timeout_override", "max_queue_size"}


def _queue_policy(data: Any, *, where: str) -> QueuePolicy:
    d = _mapping(data, where=where)
    _check_keys(d, _QUEUE_KEYS, where=where)
    action = d.get("timeout_action", "REJECT")
    try:
        timeout_action = TimeoutAction(str(action).upper())
    except ValueError:
        raise ConfigError(f"{where}.timeout_action must be REJECT or DELAY, got {action!r}") from None
    return QueuePolicy(
        timeout_action=timeout_action,
        default_timeout_microseconds=_int(
            d.get("default_timeout_microseconds", 0), where=f"{where}.default_timeout_microseconds", minimum=0
        ),
        allow_timeout_override=_bool(
            d.get("allow_timeout_override", False), where=f"{where}.allow_timeout_override"
        ),
        max_queue_size=_int(d.get("max_queue_size", 0), where=f"{where}.max_queue_size", minimum=0),
    )


_BATCHING_KEYS = {
    "preferred_batch_size",
    "max_queue_delay_microseconds",
    "preserve_ordering",
    "priority_levels",
    "default_priority_level",
    "default_queue_policy",
    "priority_queue_policy",
}


def dynamic_batching_from_dict(data: Any, *, where: str) -> DynamicBatching:
    if data is None or data is True:
        return DynamicBatching()
    d = _mapping(data, where=where)
    _check_keys(d, _BATCHING_KEYS, where=where)
    pqp_raw = _mapping(d.get("priority_queue_policy", {}), where=f"{where}.priority_queue_policy")
    pqp: dict[int, QueuePolicy] = {}
    for level, policy in pqp_raw.items():
        try:
            key = int(level)
        except (TypeError, ValueError):
            raise ConfigError(
                f"{where}.priority_queue_policy keys must be priority levels (integers)"
            ) from None
        pqp[key] = _queue_policy(policy, where=f"{where}.priority_queue_policy[{key}]")
    dqp = d.get("default_queue_policy")
    return DynamicBatching(
        preferred_batch_size=sequence_of_ints(
            d.get("preferred_batch_size", []), what=f"{where}.preferred_batch_size"
        ),
        max_queue_delay_microseconds=_int(
            d.get("max_queue_delay_microseconds", 0), where=f"{where}.max_queue_delay_microseconds", minimum=0
        ),
        preserve_ordering=_bool(d.get("preserve_ordering", False), where=f"{where}.preserve_ordering"),
        priority_levels=_int(d.get("priority_levels", 0), where=f"{where}.priority_levels", minimum=0),
        default_priority_level=_int(
            d.get("default_priority_level", 0), where=f"{where}.default_priority_level", minimum=0
        ),
        default_queue_policy=None
        if dqp is None
        else _queue_policy(dqp, where=f"{where}.default_queue_policy"),
        priority_queue_policy=pqp,
    )


def instance_group_from_dict(data: Any, *, where: str) -> InstanceGroup:
    d = _mapping(data, where=where)
    _check_keys(d, {"kind", "count", "gpus", "name"}, where=where)
    kind_raw = str(d.get("kind", "KIND_AUTO")).upper()
    if not kind_raw.startswith("KIND_"):
        kind_raw = f"KIND_{kind_raw}"
    try:
        kind = InstanceKind(kind_raw)
    except ValueError:
        raise ConfigError(
            f"{where}.kind must be one of KIND_CPU, KIND_GPU, KIND_MODEL, KIND_AUTO, got {d.get('kind')!r}"
        ) from None
    return InstanceGroup(
        kind=kind,
        count=_int(d.get("count", 1), where=f"{where}.count", minimum=1),
        gpus=sequence_of_ints(d.get("gpus", []), what=f"{where}.gpus"),
        name=str(d.get("name", "")),
    )


def version_policy_from_dict(data: Any, *, where: str) -> VersionPolicy:
    d = _mapping(data, where=where)
    _check_keys(d, {"latest", "all", "specific"}, where=where)
    if len(d) != 1:
        raise ConfigError(
            f"{where} must have exactly one of latest, all, specific",
            hint="e.g. version_policy: {latest: {num_versions: 2}}",
        )
    if "latest" in d:
        latest = _mapping(d["latest"], where=f"{where}.latest")
        _check_keys(latest, {"num_versions"}, where=f"{where}.latest")
        return VersionPolicy(
            latest=_int(latest.get("num_versions", 1), where=f"{where}.latest.num_versions", minimum=1)
        )
    if "all" in d:
        return VersionPolicy(all=True)
    specific = d["specific"]
    if isinstance(specific, Mapping):
        _check_keys(specific, {"versions"}, where=f"{where}.specific")
        specific = specific.get("versions", [])
    versions = sequence_of_ints(specific, what=f"{where}.specific.versions")
    if not versions:
        raise ConfigError(f"{where}.specific needs at least one version")
    return VersionPolicy(specific=versions)


def _str_map(value: Any, *, where: str) -> dict[str, str]:
    d = _mapping(value, where=where)
    out: dict[str, str] = {}
    for key, val in d.items():
        out[_str(key, where=f"{where} key")] = _str(val, where=f"{where}[{key}]")
    return out


def ensemble_step_from_dict(data: Any, *, where: str) -> EnsembleStep:
    """``{model, version?, inputs: {member_input: ensemble_tensor}, outputs: {...}}``."""
    d = _mapping(data, where=where)
    _check_keys(
        d,
        {"model", "model_name", "version", "model_version", "inputs", "outputs", "input_map", "output_map"},
        where=where,
    )
    model = _str(d.get("model", d.get("model_name")), where=f"{where}.model")
    return EnsembleStep(
        model_name=model,
        model_version=_int(
            d.get("version", d.get("model_version", -1)), where=f"{where}.version", minimum=-1
        ),
        input_map=_str_map(d.get("inputs", d.get("input_map", {})), where=f"{where}.inputs"),
        output_map=_str_map(d.get("outputs", d.get("output_map", {})), where=f"{where}.outputs"),
    )
