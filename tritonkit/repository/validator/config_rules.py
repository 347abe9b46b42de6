"""Rules that need only one config file: what Triton's ValidateModelConfig would refuse.

Each rule reports through ``ConfigFile.error``/``warning`` with a field path, so the problem
carries the line of the offending field.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from tritonkit.config import DataType, data_type_name
from tritonkit.kinds.names import TENSORRTLLM as TRTLLM_BACKEND
from tritonkit.kinds.names import VLLM as VLLM_BACKEND
from tritonkit.repository.validator.report import ConfigFile

__all__ = ["KNOWN_BACKENDS", "PLATFORM_BACKEND", "check_config", "full_shape"]

#: platform -> the backend that serves it
PLATFORM_BACKEND = {
    "tensorrt_plan": "tensorrt",
    "tensorflow_graphdef": "tensorflow",
    "tensorflow_savedmodel": "tensorflow",
    "onnxruntime_onnx": "onnxruntime",
    "pytorch_libtorch": "pytorch",
}
#: backends Triton ships or documents; anything else is a custom backend (a warning)
KNOWN_BACKENDS = frozenset(
    {
        "python", "onnxruntime", "tensorrt", "pytorch", "tensorflow", "openvino", "fil", "dali",
        "identity", "repeat", "square", VLLM_BACKEND, TRTLLM_BACKEND,
    }
)  # fmt: skip
_TYPED_BACKENDS = frozenset({"onnxruntime", "tensorrt", "pytorch", "tensorflow"})
_CORRID_TYPES = {DataType.UINT64, DataType.INT64, DataType.UINT32, DataType.INT32, DataType.BYTES}


def full_shape(dims: Iterable[int], max_batch_size: int) -> tuple[int, ...]:
    """The shape a request sees: the batch dimension (-1) first when the model batches."""
    return ((-1,) if max_batch_size > 0 else ()) + tuple(dims)


def check_config(cf: ConfigFile, *, dir_name: str) -> None:
    cfg = cf.config
    if cfg.name and cfg.name != dir_name:
        cf.error(
            "name-mismatch",
            f"config name '{cfg.name}' does not match the model directory '{dir_name}'",
            at="name",
        )
    if cfg.max_batch_size < 0:
        cf.error(
            "max-batch-size-negative",
            f"max_batch_size must be >= 0, got {cfg.max_batch_size}",
            at="max_batch_size",
        )
    _platform_backend(cf)
    _io(cf)
    _dynamic_batching(cf)
    _batch_io(cf)
    _sequence_batching(cf)
    _instance_groups(cf)
    _ensemble_fields(cf)
    if cfg.model_transaction_policy.decoupled and cfg.response_cache.enable:
        cf.error(
            "response-cache-unsupported",
            "the response cache does not support decoupled models; disable response_cache",
            at="response_cache",
        )


def _platform_backend(cf: ConfigFile) -> None:
    cfg = cf.config
    platform, backend = cfg.platform, cfg.backend
    if platform == "ensemble":
        if backend:
            cf.error("ensemble-backend", "an ensemble must have an empty backend", at="backend")
        return
    if platform and platform not in PLATFORM_BACKEND and not backend:
        cf.error(
            "unknown-platform",
            f"unknown platform '{platform}' (known: ensemble, {', '.join(sorted(PLATFORM_BACKEND))})",
            at="platform",
        )
    if backend and backend not in KNOWN_BACKENDS:
        cf.warning(
            "unknown-backend",
            f"backend '{backend}' is not one tritonkit knows; fine if the server has this custom backend",
            at="backend",
        )
    if backend in _TYPED_BACKENDS and platform and PLATFORM_BACKEND.get(platform) != backend:
        cf.error(
            "platform-backend-mismatch",
            f"platform '{platform}' cannot be served by backend '{backend}'",
            at="backend",
        )


def _io(cf: ConfigFile) -> None:
    cfg = cf.config
    for kind, tensors in (("input", cfg.input), ("output", cfg.output)):
        seen: set[str] = set()
        for i, io in enumerate(tensors):
            at = f"{kind}[{i}]"
            label = f"{kind} '{io.name}'" if io.name else f"{kind} #{i}"
            if not io.name:
                cf.error("tensor-name-missing", f"{label} must have a name", at=at)
            elif io.name in seen:
                cf.error("duplicate-tensor", f"{label} is declared twice", at=f"{at}.name")
            seen.add(io.name)
            if io.data_type == 0:
                cf.error("data-type-missing", f"{label} must set data_type", at=at)
            _shape(cf, io, label=label, at=at)
            if io.is_shape_tensor and cfg.platform != "tensorrt_plan":
                cf.error(
                    "shape-tensor-not-tensorrt",
                    f"{label}: shape tensors are only supported for platform tensorrt_plan",
                    at=f"{at}.is_shape_tensor",
                )
            if kind == "input" and io.format in (io.FORMAT_NHWC, io.FORMAT_NCHW) and len(io.dims) != 3:
                cf.error(
                    "format-dims", f"{label}: format NHWC/NCHW requires exactly 3 dims", at=f"{at}.format"
                )
            if kind == "input" and io.allow_ragged_batch and cfg.max_batch_size == 0:
                cf.warning(
                    "batching-ignored",
                    f"{label}: allow_ragged_batch has no effect on a model with max_batch_size 0",
                    at=f"{at}.allow_ragged_batch",
                )


def _element_count(dims: Sequence[int]) -> int:
    """Triton's GetElementCount: -1 if any dim is variable, 0 for no dims."""
    if any(d == -1 for d in dims):
        return -1
    count = 0
    for d in dims:
        count = d if count == 0 else count * d
    return count


def _chunks(dims: Sequence[int]) -> list[int]:
    out, current = [], 1
    for d in dims:
        if d == -1:
            out.append(current)
            current = 1
        else:
            current *= d
    out.append(current)
    return out


def _bad_dim(dims: Sequence[int]) -> int | None:
    """The first dim Triton refuses in dims or a reshape (each is >= 1, or -1 for variable)."""
    return next((d for d in dims if d < 1 and d != -1), None)


def _shape(cf: ConfigFile, io: Any, *, label: str, at: str) -> None:
    dims = list(io.dims)
    if not dims:
        cf.error(
            "dims-missing",
            f"{label} must set dims (for a scalar per batch item use dims: [1] with reshape: {{shape: []}})",
            at=at,
        )
    bad_dim = _bad_dim(dims)
    if bad_dim is not None:
        cf.error(
            "dims-invalid",
            f"{label}: dims {dims} contain {bad_dim}; each dim must be >= 1, or -1 for a variable size",
            at=f"{at}.dims",
        )
    if not io.HasField("reshape"):
        return
    shape = list(io.reshape.shape)
    if not shape and cf.config.max_batch_size == 0:
        cf.error("reshape-invalid", f"{label}: an empty reshape needs a batching model", at=f"{at}.reshape")
        return
    bad_reshape = _bad_dim(shape)
    if bad_reshape is not None:
        cf.error(
            "reshape-invalid",
            f"{label}: reshape {shape} contains {bad_reshape}; each dim must be >= 1, or -1",
            at=f"{at}.reshape",
        )
        return
    if bad_dim is not None or not dims:
        return
    d_count, r_count = _element_count(dims), _element_count(shape)
    if d_count != r_count and (r_count != 0 or d_count != 1):
        cf.error(
            "reshape-mismatch",
            f"{label}: dims {dims} and reshape {shape} hold different numbers of elements",
            at=f"{at}.reshape",
        )
    elif d_count == -1:
        d_chunks, r_chunks = _chunks(dims), _chunks(shape)
        if len(d_chunks) != len(r_chunks):
            cf.error(
                "reshape-mismatch",
                f"{label}: dims {dims} and reshape {shape} have different numbers of variable (-1) dims",
                at=f"{at}.reshape",
            )
        elif d_chunks != r_chunks:
            cf.error(
                "reshape-mismatch",
                f"{label}: dims {dims} and reshape {shape} differ in size between variable dims",
                at=f"{at}.reshape",
            )


def _preferred_sizes(cf: ConfigFile, sizes: Sequence[int], *, at: str, what: str) -> None:
    mbs = cf.config.max_batch_size
    for size in sizes:
        if size <= 0:
            cf.error("preferred-batch-size-invalid", f"{what} preferred batch size {size} must be > 0", at=at)
        elif mbs == 0:
            cf.error(
                "batching-not-supported",
                f"{what} preferred batch size {size} on a model with max_batch_size 0, which cannot batch",
                at=at,
            )
        elif size > mbs:
            cf.error(
                "preferred-batch-size-too-large",
                f"{what} preferred batch size {size} is larger than max_batch_size {mbs}",
                at=at,
            )


def _dynamic_batching(cf: ConfigFile) -> None:
    cfg = cf.config
    if not cfg.HasField("dynamic_batching"):
        return
    db = cfg.dynamic_batching
    _preferred_sizes(
        cf, list(db.preferred_batch_size), at="dynamic_batching.preferred_batch_size", what="dynamic batching"
    )
    if cfg.max_batch_size == 0 and not db.preferred_batch_size:
        cf.warning(
            "batching-ignored",
            "dynamic_batching on a model with max_batch_size 0 only queues requests; it never batches them",
            at="dynamic_batching",
        )
    levels = db.priority_levels
    if levels:
        if not 1 <= db.default_priority_level <= levels:
            cf.error(
                "priority-level-invalid",
                f"default_priority_level {db.default_priority_level} must be in [1, {levels}] "
                f"when priority_levels is {levels}",
                at="dynamic_batching.default_priority_level"
                if db.default_priority_level
                else "dynamic_batching.priority_levels",
            )
        for level in sorted(db.priority_queue_policy):
            if not 1 <= level <= levels:
                cf.error(
                    "priority-level-invalid",
                    f"priority_queue_policy for level {level} is outside [1, {levels}]",
                    at=f"dynamic_batching.priority_queue_policy[{level}]",
                )
    if db.preserve_ordering:
        if levels > 1:
            cf.error(
                "preserve-ordering-conflict",
                f"preserve_ordering allows only one priority level, got priority_levels {levels}",
                at="dynamic_batching.preserve_ordering",
            )
        policies = [("default_queue_policy", db.default_queue_policy)] + [
            (f"priority_queue_policy[{k}]", db.priority_queue_policy[k])
            for k in sorted(db.priority_queue_policy)
        ]
        for where, policy in policies:
            if policy.default_timeout_microseconds and policy.timeout_action == policy.DELAY:
                cf.error(
                    "preserve-ordering-conflict",
                    f"{where} uses timeout_action DELAY, which cannot be combined with preserve_ordering",
                    at=f"dynamic_batching.{where}",
                )


def _batch_io(cf: ConfigFile) -> None:
    cfg = cf.config
    inputs = {io.name for io in cfg.input}
    outputs = {io.name for io in cfg.output}
    if (cfg.batch_input or cfg.batch_output) and cfg.max_batch_size == 0:
        cf.warning(
            "batching-ignored",
            "batch_input/batch_output describe batches, but max_batch_size is 0",
            at="batch_input" if cfg.batch_input else "batch_output",
        )
    for i, bi in enumerate(cfg.batch_input):
        at = f"batch_input[{i}]"
        kind = type(bi).Kind.Name(bi.kind)
        if len(bi.source_input) != 1:
            cf.error(
                "batch-input-invalid",
                f"batch input kind {kind} expects 1 source input, got {len(bi.source_input)}",
                at=f"{at}.source_input",
            )
        if bi.data_type not in (DataType.INT32.proto_value, DataType.FP32.proto_value):
            cf.error(
                "batch-input-invalid",
                f"batch input data type must be TYPE_INT32 or TYPE_FP32, got {data_type_name(bi.data_type)}",
                at=f"{at}.data_type",
            )
        if not bi.target_name:
            cf.error("batch-input-invalid", "batch input must name a target_name", at=at)
        for source in bi.source_input:
            if source not in inputs:
                cf.error("batch-input-invalid", f"unknown source input '{source}'", at=f"{at}.source_input")
    for i, bo in enumerate(cfg.batch_output):
        at = f"batch_output[{i}]"
        if len(bo.source_input) != 1:
            cf.error(
                "batch-output-invalid",
                f"batch output kind BATCH_SCATTER_WITH_INPUT_SHAPE expects 1 source input, got "
                f"{len(bo.source_input)}",
                at=f"{at}.source_input",
            )
        for source in bo.source_input:
            if source not in inputs:
                cf.error("batch-output-invalid", f"unknown source input '{source}'", at=f"{at}.source_input")
        seen: set[str] = set()
        for target in bo.target_name:
            if target not in outputs:
                cf.error("batch-output-invalid", f"unknown target output '{target}'", at=f"{at}.target_name")
            if target in seen:
                cf.error(
                    "batch-output-invalid", f"target output '{target}' is named twice", at=f"{at}.target_name"
                )
            seen.add(target)


def _sequence_batching(cf: ConfigFile) -> None:
    cfg = cf.config
    if not cfg.HasField("sequence_batching"):
        return
    sb = cfg.sequence_batching
    if cfg.response_cache.enable:
        cf.error(
            "response-cache-unsupported",
            "the response cache does not support sequence batching; disable response_cache",
            at="response_cache",
        )
    seen_tensors: set[str] = set()
    seen_kinds: set[int] = set()
    for i, ci in enumerate(sb.control_input):
        at = f"sequence_batching.control_input[{i}]"
        if not ci.name:
            cf.error("sequence-control-invalid", "a sequence batching control tensor must have a name", at=at)
        elif ci.name in seen_tensors:
            cf.error(
                "sequence-control-invalid",
                f"control tensor '{ci.name}' is used for more than one control",
                at=f"{at}.name",
            )
        seen_tensors.add(ci.name)
        for j, control in enumerate(ci.control):
            _control(cf, control, name=ci.name, at=f"{at}.control[{j}]", seen_kinds=seen_kinds)
    if sb.HasField("oldest"):
        _preferred_sizes(
            cf,
            list(sb.oldest.preferred_batch_size),
            at="sequence_batching.oldest.preferred_batch_size",
            what="sequence batching",
        )
    if sb.HasField("direct") and not 0.0 <= sb.direct.minimum_slot_utilization <= 1.0:
        cf.error(
            "sequence-batching-invalid",
            f"minimum_slot_utilization {sb.direct.minimum_slot_utilization} must be in (0.0, 1.0]",
            at="sequence_batching.direct.minimum_slot_utilization",
        )


def _control(cf: ConfigFile, control: Any, *, name: str, at: str, seen_kinds: set[int]) -> None:
    kind_name = type(control).Kind.Name(control.kind)
    if control.kind in seen_kinds:
        cf.error("sequence-control-invalid", f"{kind_name} is given by more than one control tensor", at=at)
    seen_kinds.add(control.kind)
    given = {
        "int32_false_true": len(control.int32_false_true),
        "fp32_false_true": len(control.fp32_false_true),
        "bool_false_true": len(control.bool_false_true),
    }
    used = [k for k, n in given.items() if n]
    if control.kind == control.CONTROL_SEQUENCE_CORRID:
        if used:
            cf.error(
                "sequence-control-invalid",
                f"{kind_name} ('{name}') must not set {used[0]}; it carries the correlation ID",
                at=at,
            )
        dtype = data_type_name(control.data_type)
        if dtype == "INVALID" or DataType.parse(dtype) not in _CORRID_TYPES:
            cf.error(
                "sequence-control-invalid",
                f"{kind_name} ('{name}') data_type must be UINT64, INT64, UINT32, INT32 or BYTES, "
                f"got {dtype}",
                at=at,
            )
        return
    if len(used) != 1:
        cf.error(
            "sequence-control-invalid",
            f"{kind_name} ('{name}') must set exactly one of int32_false_true, fp32_false_true, "
            f"bool_false_true, got {', '.join(used) or 'none'}",
            at=at,
        )
    elif given[used[0]] != 2:
        cf.error(
            "sequence-control-invalid",
            f"{kind_name} ('{name}') {used[0]} must have exactly 2 entries (false, true), "
            f"got {given[used[0]]}",
            at=at,
        )


def _instance_group_name(model: str, index: int, given: str) -> str:
    """The name Triton gives an instance group: its own, else ``<model>_<index>`` (the group's place
    among all of them; core's NormalizeInstanceGroup), the name its refusals quote."""
    return given or f"{model}_{index}"


def _instance_groups(cf: ConfigFile) -> None:
    cfg = cf.config
    model = cfg.name or cf.model
    for i, group in enumerate(cfg.instance_group):
        at = f"instance_group[{i}]"
        # Triton's own wording: "instance group <name> of model <model> ..."
        label = f"instance group {_instance_group_name(model, i, group.name)} of model {model}"
        kind = type(group).Kind.Name(group.kind)
        if group.gpus and group.kind in (group.KIND_CPU, group.KIND_MODEL):
            cf.error(
                "instance-group-invalid", f"{label} has kind {kind} and must not list gpus", at=f"{at}.gpus"
            )
        negative = [gpu for gpu in group.gpus if gpu < 0]
        if negative:
            cf.error(
                "instance-group-invalid",
                f"{label} lists invalid gpu id(s) {negative}; GPU ids are >= 0",
                at=f"{at}.gpus",
            )
        if group.count < 0:
            cf.error("instance-group-invalid", f"{label}: count must be >= 1, got {group.count}", at=at)
        if group.profile and cfg.platform != "tensorrt_plan":
            cf.error(
                "instance-group-invalid",
                f"{label}: 'profile' is only supported for TensorRT models",
                at=f"{at}.profile",
            )


def _ensemble_fields(cf: ConfigFile) -> None:
    cfg = cf.config
    has_sched = cfg.HasField("ensemble_scheduling")
    if cfg.platform != "ensemble":
        if has_sched:
            cf.error(
                "ensemble-scheduling-not-ensemble",
                f"ensemble_scheduling is set but platform is '{cfg.platform or cfg.backend}', not 'ensemble'",
                at="ensemble_scheduling",
            )
        return
    if not has_sched:
        cf.error(
            "ensemble-scheduling-missing", "platform 'ensemble' needs ensemble_scheduling", at="platform"
        )
        return
    for field_name in ("instance_group", "model_warmup"):
        if len(getattr(cfg, field_name)):
            cf.error("ensemble-invalid-field", f"{field_name} cannot be set for an ensemble", at=field_name)
    if cfg.HasField("optimization"):
        cf.error("ensemble-invalid-field", "optimization cannot be set for an ensemble", at="optimization")
    steps = cfg.ensemble_scheduling.step
    if not steps:
        cf.error("ensemble-no-steps", "ensemble_scheduling has no step", at="ensemble_scheduling")
    for i, step in enumerate(steps):
        at = f"ensemble_scheduling.step[{i}]"
        if not step.model_name:
            cf.error("ensemble-step-invalid", f"step {i} must set model_name", at=at)
        if not step.input_map:
            cf.error("ensemble-step-invalid", f"step {i} ({step.model_name}) must set input_map", at=at)
        if not step.output_map:
            cf.error("ensemble-step-invalid", f"step {i} ({step.model_name}) must set output_map", at=at)
