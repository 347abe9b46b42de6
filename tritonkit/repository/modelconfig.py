"""Turn one spec model entry (plus what its model file says) into a ModelConfig proto."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tritonkit.config import ModelConfig, ModelConfigSpec, TensorSpec
from tritonkit.config.fromdict import (
    dynamic_batching_from_dict,
    ensemble_step_from_dict,
    instance_group_from_dict,
    tensor_from_dict,
    version_policy_from_dict,
)
from tritonkit.errors import ConfigError, SpecError
from tritonkit.kinds.entry import ModelEntry, ModelKind
from tritonkit.repository.onnx_import import DEFAULT_MAX_BATCH_SIZE, OnnxSignature

__all__ = ["build_config", "label_sources"]


def build_config(
    entry: ModelEntry,
    fields: Mapping[str, Any],
    *,
    signature: OnnxSignature | None = None,
) -> ModelConfig:
    """The config for ``entry`` using ``fields`` (the entry's own, or merged with a variant)."""
    try:
        return _build(entry, fields, signature).to_proto()
    except SpecError:
        raise
    except ConfigError as exc:
        raise SpecError(f"{entry.where}: {exc.message}", hint=exc.hint) from exc


def _build(entry: ModelEntry, fields: Mapping[str, Any], signature: OnnxSignature | None) -> ModelConfigSpec:
    where = entry.where
    platform = _opt_str(fields.get("platform"), f"{where}.platform")
    backend = _opt_str(fields.get("backend"), f"{where}.backend")
    if entry.kind is ModelKind.PYTHON and not backend:
        backend = "python"
    if entry.kind is ModelKind.ONNX and not backend and not platform:
        backend = "onnxruntime"
    mbs_given = "max_batch_size" in fields
    mbs = fields.get("max_batch_size", 0)
    if isinstance(mbs, bool) or not isinstance(mbs, int):
        raise SpecError(f"{where}.max_batch_size must be an integer, got {mbs!r}")
    if mbs < 0:
        raise SpecError(f"{where}.max_batch_size must be >= 0, got {mbs}")

    inputs = _tensors(fields.get("inputs"), f"{where}.inputs")
    outputs = _tensors(fields.get("outputs"), f"{where}.outputs")
    if signature is not None and (inputs is None or outputs is None):
        if not mbs_given and signature.batchable:
            mbs = DEFAULT_MAX_BATCH_SIZE
        auto_in, auto_out = signature.tensors(max_batch_size=mbs)
        inputs = auto_in if inputs is None else inputs
        outputs = auto_out if outputs is None else outputs
    if entry.kind in (ModelKind.PYTHON, ModelKind.ENSEMBLE) and (not inputs or not outputs):
        what = "a Python model" if entry.kind is ModelKind.PYTHON else "an ensemble"
        raise SpecError(
            f"{where}: {what} needs its signature declared: 'inputs' and 'outputs'",
            hint="e.g. inputs: [{name: INPUT0, data_type: FP32, dims: [-1]}]",
        )

    batching = None
    if fields.get("dynamic_batching") is not None and fields.get("dynamic_batching") is not False:
        batching = dynamic_batching_from_dict(fields["dynamic_batching"], where=f"{where}.dynamic_batching")
    groups_raw = fields.get("instance_group", []) or []
    if not isinstance(groups_raw, list):
        raise SpecError(f"{where}.instance_group must be a list")
    groups = tuple(
        instance_group_from_dict(g, where=f"{where}.instance_group[{i}]") for i, g in enumerate(groups_raw)
    )
    policy = None
    if fields.get("version_policy") is not None:
        policy = version_policy_from_dict(fields["version_policy"], where=f"{where}.version_policy")
    params_raw = fields.get("parameters", {}) or {}
    if not isinstance(params_raw, Mapping):
        raise SpecError(f"{where}.parameters must be a mapping of names to values")
    params = {str(k): _param(v) for k, v in params_raw.items()}
    extra = fields.get("extra", {}) or {}
    if not isinstance(extra, Mapping):
        raise SpecError(f"{where}.extra must be a mapping of ModelConfig fields (protobuf JSON form)")
    steps = tuple(ensemble_step_from_dict(s, where=f"{where}.steps[{i}]") for i, s in enumerate(entry.steps))
    decoupled = _decoupled(fields, extra, where)
    return ModelConfigSpec(
        name=entry.name,
        platform=platform,
        backend=backend,
        max_batch_size=mbs,
        inputs=inputs or (),
        outputs=outputs or (),
        dynamic_batching=batching,
        instance_groups=groups,
        version_policy=policy,
        parameters=params,
        ensemble_steps=steps,
        default_model_filename=_opt_str(
            fields.get("default_model_filename"), f"{where}.default_model_filename"
        ),
        decoupled=decoupled,
        extra=extra,
    )


def _decoupled(fields: Mapping[str, Any], extra: Mapping[str, Any], where: str) -> bool:
    """``decoupled: true|false``; the older ``extra.model_transaction_policy`` spelling still works,
    but the two must not disagree (``extra`` is merged last and would silently win)."""
    if "decoupled" not in fields:
        return False
    value = fields["decoupled"]
    if not isinstance(value, bool):
        raise SpecError(f"{where}.decoupled must be true or false, got {value!r}")
    policy = extra.get("model_transaction_policy")
    if isinstance(policy, Mapping) and "decoupled" in policy and policy["decoupled"] is not value:
        raise SpecError(
            f"{where}: decoupled: {str(value).lower()} contradicts "
            f"extra.model_transaction_policy.decoupled: {policy['decoupled']!r}",
            hint="keep only 'decoupled:' and remove model_transaction_policy from 'extra'",
        )
    return value


def label_sources(fields: Mapping[str, Any]) -> list[str]:
    """The ``labels:`` paths of the outputs, as written in the spec."""
    out: list[str] = []
    for tensor in fields.get("outputs") or []:
        if isinstance(tensor, Mapping):
            label = tensor.get("labels", tensor.get("label_filename"))
            if isinstance(label, str) and label:
                out.append(label)
    return out


def _tensors(raw: Any, where: str) -> tuple[TensorSpec, ...] | None:
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise SpecError(f"{where} must be a list of tensors")
    return tuple(tensor_from_dict(t, where=f"{where}[{i}]") for i, t in enumerate(raw))


def _opt_str(value: Any, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise SpecError(f"{where} must be a string, got {value!r}")
    return value


def _param(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
