"""What a vLLM stage's build writes: its config.pbtxt and its version directory::

    decoder/config.pbtxt               backend "vllm", max_batch_size 0, decoupled, KIND_MODEL
    decoder/1/model.json               {"model": "<serving_root>/decoder/1/hf_model", ...engine}
    decoder/1/hf_model/...             the local model dir, copied (a hub id is written unchanged)
    decoder/1/multi_lora.json          {"colours": "<serving_root>/decoder/1/lora/colours"}
    decoder/1/lora/colours/...         the adapter dir, copied

NVIDIA's backend (triton-inference-server/vllm_backend ``src/model.py``) reads ``model.json``
from the version directory and passes it as is to vLLM's ``AsyncEngineArgs``: a relative
``model`` would be resolved against the server's working directory, not the repository. So the
packed directory is named by its absolute path on the server, ``<serving_root>`` (default
``/models``, NVIDIA's documented mount), which the build records in the manifest.
``multi_lora.json`` maps each LoRA name to its adapter directory the same way.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tritonkit.config import (
    DataType,
    InstanceGroup,
    InstanceKind,
    ModelConfig,
    ModelConfigSpec,
    TensorSpec,
)
from tritonkit.config.fromdict import instance_group_from_dict, version_policy_from_dict
from tritonkit.errors import ConfigError, SpecError
from tritonkit.kinds.entry import ModelEntry
from tritonkit.kinds.paths import served_path
from tritonkit.kinds.vllm.spec import (
    ADDITIONAL_OUTPUTS,
    BACKEND,
    ENGINE_ARGS_FILE,
    HF_MODEL_DIR,
    LORA_DIR,
    MULTI_LORA_FILE,
    VllmSpec,
)

__all__ = ["engine_args", "lora_paths", "vllm_config", "write_vllm_model"]


def engine_args(llm: VllmSpec, *, model: str, version: int, serving_root: str) -> dict[str, Any]:
    """The ``model.json`` object: ``model`` first (the packed path or the hub id), then ``engine``."""
    args: dict[str, Any] = {}
    if llm.model_dir is not None:
        args["model"] = served_path(serving_root, model, version, HF_MODEL_DIR)
    elif llm.hub_id is not None:
        args["model"] = llm.hub_id
    args.update(llm.engine)
    return args


def lora_paths(llm: VllmSpec, *, model: str, version: int, serving_root: str) -> dict[str, str]:
    """The ``multi_lora.json`` object: LoRA name -> its adapter dir on the server."""
    return {name: served_path(serving_root, model, version, LORA_DIR, name) for name in llm.lora}


#: the model-config parameter that turns on NVIDIA's vllm backend's engine health check
HEALTH_CHECK_PARAMETER = "ENABLE_VLLM_HEALTH_CHECK"


def vllm_config(entry: ModelEntry, fields: Mapping[str, Any]) -> ModelConfig:
    """The config.pbtxt of a vLLM stage (``fields``: the entry's own, or merged with a variant)."""
    llm = _spec_of(entry)
    where = entry.where
    inputs = [
        TensorSpec(name="text_input", data_type=DataType.BYTES, dims=(1,)),
        TensorSpec(name="stream", data_type=DataType.BOOL, dims=(1,), optional=True),
        TensorSpec(name="sampling_parameters", data_type=DataType.BYTES, dims=(1,), optional=True),
        TensorSpec(name="exclude_input_in_output", data_type=DataType.BOOL, dims=(1,), optional=True),
    ]
    outputs = [TensorSpec(name="text_output", data_type=DataType.BYTES, dims=(-1,))]
    for name in llm.additional_outputs:
        flag, dtype, dims = ADDITIONAL_OUTPUTS[name]
        inputs.append(TensorSpec(name=flag, data_type=DataType.BOOL, dims=(1,), optional=True))
        outputs.append(TensorSpec(name=name, data_type=dtype, dims=dims))
    try:
        groups = _instance_groups(fields.get("instance_group"), where=f"{where}.instance_group")
        policy = None
        if fields.get("version_policy") is not None:
            policy = version_policy_from_dict(fields["version_policy"], where=f"{where}.version_policy")
        params_raw = fields.get("parameters") or {}
        if not isinstance(params_raw, Mapping):
            raise SpecError(f"{where}.parameters must be a mapping of names to values")
        # NVIDIA's vllm backend (r24.12 on) checks its engine on each request and unloads a model
        # whose engine failed: readiness then says so, and explicit model control loads it again
        # (tritonkit heal beside Triton on AKS). Older releases ignore the key; a spec may set it off.
        params = {HEALTH_CHECK_PARAMETER: "true"}
        params.update({str(k): _param(v) for k, v in params_raw.items()})
        return ModelConfigSpec(
            name=entry.name,
            backend=BACKEND,
            max_batch_size=0,
            inputs=tuple(inputs),
            outputs=tuple(outputs),
            instance_groups=groups,
            version_policy=policy,
            parameters=params,
            decoupled=True,
        ).to_proto()
    except SpecError:
        raise
    except ConfigError as exc:
        raise SpecError(f"{where}: {exc.message}", hint=exc.hint) from exc


def write_vllm_model(entry: ModelEntry, version_dir: Path, *, serving_root: str) -> list[str]:
    """Write ``model.json``, the packed model dir and the LoRA adapters into ``version_dir``.

    ``version_dir`` lies in the build's scratch directory (renamed into the repository as a
    whole), so files here need no atomic writes of their own. Returns notes for the user.
    """
    llm = _spec_of(entry)
    notes: list[str] = []
    if llm.model_dir is not None:
        _copy_tree(llm.model_dir, version_dir / HF_MODEL_DIR, entry)
    args = engine_args(llm, model=entry.name, version=entry.version, serving_root=serving_root)
    (version_dir / ENGINE_ARGS_FILE).write_text(json.dumps(args, indent=2) + "\n", encoding="utf-8")
    if llm.lora:
        for name, src in llm.lora.items():
            _copy_tree(src, version_dir / LORA_DIR / name, entry)
        paths = lora_paths(llm, model=entry.name, version=entry.version, serving_root=serving_root)
        (version_dir / MULTI_LORA_FILE).write_text(json.dumps(paths, indent=2) + "\n", encoding="utf-8")
    if llm.model_dir is not None:
        notes.append(
            f"'{entry.name}' names its model as {args['model']}: serve the repository at "
            f"{serving_root} (tritonkit serve maps it to the local copy)"
        )
    elif llm.hub_id is not None:
        notes.append(
            f"'{entry.name}': model {llm.hub_id!r} is no local directory, so it is written as a Hugging "
            "Face hub id: vLLM downloads it when the model loads (the server needs network access)"
        )
    if _has_placeholder(args):
        notes.append(
            f"'{entry.name}': {ENGINE_ARGS_FILE} holds an unfilled ${{...}} placeholder; fill it before "
            "serving (`tritonkit validate` reports where)"
        )
    return notes


def _spec_of(entry: ModelEntry) -> VllmSpec:
    if entry.vllm is None:
        raise SpecError(f"{entry.where}: not a vLLM stage (backend: vllm)")
    return entry.vllm


def _instance_groups(raw: Any, *, where: str) -> tuple[InstanceGroup, ...]:
    """Default one KIND_MODEL instance (the device is the engine's); an int is a count."""
    if raw is None:
        return (InstanceGroup(kind=InstanceKind.KIND_MODEL, count=1),)
    if isinstance(raw, int) and not isinstance(raw, bool):
        if raw < 1:
            raise SpecError(f"{where} must be >= 1, got {raw}")
        return (InstanceGroup(kind=InstanceKind.KIND_MODEL, count=raw),)
    if not isinstance(raw, list):
        raise SpecError(f"{where} must be a count or a list of instance groups")
    groups = []
    for i, g in enumerate(raw):
        if isinstance(g, Mapping) and "kind" not in g:
            g = {**g, "kind": InstanceKind.KIND_MODEL.value}
        groups.append(instance_group_from_dict(g, where=f"{where}[{i}]"))
    return tuple(groups)


def _param(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


_PLACEHOLDER = re.compile(r"\$\{[^}]*\}")


def _has_placeholder(value: Any) -> bool:
    if isinstance(value, str):
        return bool(_PLACEHOLDER.search(value))
    if isinstance(value, Mapping):
        return any(_has_placeholder(k) or _has_placeholder(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_placeholder(v) for v in value)
    return False


def _copy_tree(src: Path, dst: Path, entry: ModelEntry) -> None:
    """Copy a directory, following links (a hub cache's blobs) so the repository is self-contained."""
    if not src.is_dir():
        raise SpecError(f"{entry.where}: directory not found: {src}")
    shutil.copytree(src, dst, symlinks=False)
