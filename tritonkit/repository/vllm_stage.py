"""vLLM stages: spec keys -> the layout NVIDIA's vLLM backend reads.

A spec model with ``backend: vllm``::

    - name: decoder
      backend: vllm
      model: tiny_llm/            # a local Hugging Face model dir (relative to the spec) or a hub id
      engine: {max_model_len: 512, enforce_eager: true}   # vLLM engine arguments, written as given
      lora: {colours: adapters/colours}                     # optional: name -> adapter dir
      additional_outputs: [finish_reason, num_output_tokens]  # optional subset, or "all"
      instance_group: [{kind: KIND_MODEL, count: 1}]        # default; an int is a count
      parameters: {REPORT_CUSTOM_METRICS: true}             # any backend parameter

builds::

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
import math
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:  # spec.py imports this module; only the type comes back
    from tritonkit.repository.spec import ModelEntry

__all__ = [
    "ADDITIONAL_OUTPUTS",
    "BACKEND",
    "DEFAULT_SERVING_ROOT",
    "ENGINE_ARGS_FILE",
    "HF_MODEL_DIR",
    "LORA_DIR",
    "MULTI_LORA_FILE",
    "TOKENIZER_FILES",
    "VLLM_KEYS",
    "VllmStage",
    "check_serving_root",
    "engine_args",
    "has_tokenizer",
    "local_path",
    "lora_paths",
    "parse_vllm_stage",
    "stage_vllm_model",
    "vllm_config",
]

BACKEND = "vllm"
ENGINE_ARGS_FILE = "model.json"
MULTI_LORA_FILE = "multi_lora.json"
HF_MODEL_DIR = "hf_model"
LORA_DIR = "lora"
#: where NVIDIA's documentation mounts the repository (``-v $PWD/model_repository:/models``)
DEFAULT_SERVING_ROOT = "/models"

#: spec keys only a vLLM model has (besides the shared name/version/instance_group/parameters)
VLLM_KEYS = frozenset({"model", "engine", "lora", "additional_outputs"})
#: shared spec keys a vLLM model may set; anything else (source, inputs, ...) is refused
_SHARED_KEYS = frozenset(
    {"name", "backend", "version", "instance_group", "parameters", "version_policy", "variants",
     "max_batch_size", "decoupled", "target"}
)  # fmt: skip
#: keys a variant of a vLLM model may override
_VARIANT_KEYS = frozenset({"instance_group", "parameters"})

#: additional output -> (the BOOL input that asks for it, its data type, its dims), as NVIDIA's
#: backend declares them (src/model.py ``_auto_complete_inputs_and_outputs``; docs/additional_outputs.md)
ADDITIONAL_OUTPUTS: Mapping[str, tuple[str, DataType, tuple[int, ...]]] = MappingProxyType(
    {
        "finish_reason": ("return_finish_reason", DataType.BYTES, (-1,)),
        "cumulative_logprob": ("return_cumulative_logprob", DataType.FP32, (-1,)),
        "logprobs": ("return_logprobs", DataType.BYTES, (-1,)),
        "num_input_tokens": ("return_num_input_tokens", DataType.UINT32, (1,)),
        "num_output_tokens": ("return_num_output_tokens", DataType.UINT32, (-1,)),
    }
)

#: files any one of which gives a Hugging Face model directory a tokenizer transformers can load
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "vocab.json",
    "vocab.txt",
    "spiece.model",
    "sentencepiece.bpe.model",
    "tekken.json",
)
# A Hugging Face hub id: "name" or "org/name" (letters, digits, '-', '_', '.').
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*(/[A-Za-z0-9][A-Za-z0-9_.\-]*)?$")
_LORA_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")


@dataclass(frozen=True, kw_only=True)
class VllmStage:
    """The vLLM keys of one spec model, checked.

    ``model_dir`` is the local Hugging Face directory to pack (None: ``hub_id`` or the engine's
    own ``model`` is written unchanged); ``lora`` maps adapter names to their local directories.
    """

    model_dir: Path | None
    hub_id: str | None
    engine: Mapping[str, Any]
    lora: Mapping[str, Path]
    additional_outputs: tuple[str, ...]


def parse_vllm_stage(raw: Mapping[str, Any], *, base: Path, where: str, spec: Path) -> VllmStage:
    """Check the keys of a ``backend: vllm`` spec model (``raw``); paths resolve against ``base``."""
    bad = sorted(str(k) for k in raw if k not in _SHARED_KEYS | VLLM_KEYS)
    if bad:
        raise SpecError(
            f"{where}: {', '.join(bad)} do(es) not apply to a vLLM stage",
            file=spec,
            line=_line(spec, where),
            hint="a vLLM stage takes model, engine, lora, additional_outputs, instance_group, "
            "parameters, version; NVIDIA's backend fixes its inputs, outputs and batching",
        )
    if raw.get("max_batch_size", 0) != 0:
        raise SpecError(
            f"{where}.max_batch_size must be 0 for a vLLM stage (vLLM batches on its own)",
            file=spec,
            line=_line(spec, where, "max_batch_size"),
        )
    if raw.get("decoupled", True) is not True:
        raise SpecError(
            f"{where}: a vLLM stage is always decoupled (NVIDIA's backend asserts it)",
            file=spec,
            line=_line(spec, where, "decoupled"),
            hint="drop 'decoupled: false'",
        )
    engine = _engine(raw.get("engine"), where=where, spec=spec)
    model_dir, hub_id = _model(raw.get("model"), engine, base=base, where=where, spec=spec)
    lora = _lora(raw.get("lora"), engine, base=base, where=where, spec=spec)
    outputs = _additional_outputs(raw.get("additional_outputs"), where=where, spec=spec)
    for vname, vdata in (raw.get("variants") or {}).items():
        if isinstance(vdata, Mapping):
            extra = sorted(str(k) for k in vdata if k not in _VARIANT_KEYS)
            if extra:
                raise SpecError(
                    f"{where}.variants.{vname}: a vLLM stage's variant may set only "
                    f"{', '.join(sorted(_VARIANT_KEYS))}, not {', '.join(extra)}",
                    file=spec,
                    line=_line(spec, where, "variants", vname),
                )
    return VllmStage(
        model_dir=model_dir,
        hub_id=hub_id,
        engine=MappingProxyType(dict(engine)),
        lora=MappingProxyType(lora),
        additional_outputs=outputs,
    )


def check_serving_root(root: str) -> str:
    """An absolute POSIX directory (the repository's path inside the serving container)."""
    path = PurePosixPath(root)
    if not root or not path.is_absolute() or ".." in path.parts or "\\" in root:
        raise SpecError(
            f"serving root must be an absolute POSIX path such as /models, got {root!r}",
            hint="it is where the serving container mounts the repository (--serving-root)",
        )
    return str(path)


def engine_args(stage: VllmStage, *, model: str, version: int, serving_root: str) -> dict[str, Any]:
    """The ``model.json`` object: ``model`` first (the packed path or the hub id), then ``engine``."""
    args: dict[str, Any] = {}
    if stage.model_dir is not None:
        args["model"] = f"{serving_root.rstrip('/')}/{model}/{version}/{HF_MODEL_DIR}"
    elif stage.hub_id is not None:
        args["model"] = stage.hub_id
    args.update(stage.engine)
    return args


def lora_paths(stage: VllmStage, *, model: str, version: int, serving_root: str) -> dict[str, str]:
    """The ``multi_lora.json`` object: LoRA name -> its adapter dir on the server."""
    root = serving_root.rstrip("/")
    return {name: f"{root}/{model}/{version}/{LORA_DIR}/{name}" for name in stage.lora}


def vllm_config(entry: ModelEntry, fields: Mapping[str, Any]) -> ModelConfig:
    """The config.pbtxt of a vLLM stage (``fields``: the entry's own, or merged with a variant)."""
    stage = _stage_of(entry)
    where = entry.where
    inputs = [
        TensorSpec(name="text_input", data_type=DataType.BYTES, dims=(1,)),
        TensorSpec(name="stream", data_type=DataType.BOOL, dims=(1,), optional=True),
        TensorSpec(name="sampling_parameters", data_type=DataType.BYTES, dims=(1,), optional=True),
        TensorSpec(name="exclude_input_in_output", data_type=DataType.BOOL, dims=(1,), optional=True),
    ]
    outputs = [TensorSpec(name="text_output", data_type=DataType.BYTES, dims=(-1,))]
    for name in stage.additional_outputs:
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
        params = {str(k): _param(v) for k, v in params_raw.items()}
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


def stage_vllm_model(entry: ModelEntry, version_dir: Path, *, serving_root: str) -> list[str]:
    """Write ``model.json``, the packed model dir and the LoRA adapters into ``version_dir``.

    ``version_dir`` lies in the build's staging directory (renamed into the repository as a
    whole), so files here need no atomic writes of their own. Returns notes for the user.
    """
    stage = _stage_of(entry)
    notes: list[str] = []
    if stage.model_dir is not None:
        _copy_tree(stage.model_dir, version_dir / HF_MODEL_DIR, entry)
    args = engine_args(stage, model=entry.name, version=entry.version, serving_root=serving_root)
    (version_dir / ENGINE_ARGS_FILE).write_text(json.dumps(args, indent=2) + "\n", encoding="utf-8")
    if stage.lora:
        for name, src in stage.lora.items():
            _copy_tree(src, version_dir / LORA_DIR / name, entry)
        paths = lora_paths(stage, model=entry.name, version=entry.version, serving_root=serving_root)
        (version_dir / MULTI_LORA_FILE).write_text(json.dumps(paths, indent=2) + "\n", encoding="utf-8")
    if stage.model_dir is not None:
        notes.append(
            f"'{entry.name}' names its model as {args['model']}: serve the repository at "
            f"{serving_root} (tritonkit serve maps it to the local copy)"
        )
    elif stage.hub_id is not None:
        notes.append(
            f"'{entry.name}': model {stage.hub_id!r} is no local directory, so it is written as a Hugging "
            "Face hub id: vLLM downloads it when the model loads (the server needs network access)"
        )
    if _has_placeholder(args):
        notes.append(
            f"'{entry.name}': {ENGINE_ARGS_FILE} holds an unfilled ${{...}} placeholder; fill it before "
            "serving (`tritonkit validate` reports where)"
        )
    return notes


def local_path(server_path: str, *, model_dir: Path, version: int) -> Path | None:
    """Where a server path of the model-path rule lies in this repository.

    ``<anything>/<model>/<version>/<rest>`` (``model``: ``model_dir``'s name) maps onto
    ``model_dir/<version>/<rest>``, whatever the serving root; another absolute path that exists
    here is itself; anything else (a path only the server has, a relative path) is None. The
    validator and tritonkit's local vLLM backend both resolve ``model.json`` paths with it.
    """
    path = PurePosixPath(server_path)
    if not path.is_absolute():
        return None
    parts = path.parts
    for i in range(len(parts) - 1):
        if parts[i] == model_dir.name and parts[i + 1] == str(version):
            return model_dir.joinpath(str(version), *parts[i + 2 :])
    own = Path(server_path)
    return own if own.exists() else None


def has_tokenizer(model_dir: Path) -> bool:
    """Whether ``model_dir`` holds a tokenizer transformers can load (any of TOKENIZER_FILES,
    or a ``*.tiktoken`` file)."""
    return any((model_dir / name).is_file() for name in TOKENIZER_FILES) or any(model_dir.glob("*.tiktoken"))


# --------------------------------------------------------------------------------------------


_WHERE_NAME = re.compile(r"^model '(?P<name>[^']+)'")


def _line(spec: Path, where: str, *keys: str | int) -> int | None:
    """The spec line of ``models[<name>].<keys>`` (``where`` is "model '<name>'")."""
    from tritonkit.repository.spec import spec_line  # spec.py imports this module

    match = _WHERE_NAME.match(where)
    return spec_line(spec, match.group("name"), *keys) if match else None


def _stage_of(entry: ModelEntry) -> VllmStage:
    if entry.vllm is None:
        raise SpecError(f"{entry.where}: not a vLLM stage (backend: vllm)")
    return entry.vllm


def _engine(raw: Any, *, where: str, spec: Path) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise SpecError(
            f"{where}.engine must map vLLM engine argument names to values",
            file=spec,
            line=_line(spec, where, "engine"),
            hint="e.g. engine: {max_model_len: 2048, gpu_memory_utilization: 0.9}",
        )
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise SpecError(
                f"{where}.engine: {key!r} is not an engine argument name",
                file=spec,
                line=_line(spec, where, "engine", str(key)),
                hint="use the Python name (max_model_len), not the CLI flag (--max-model-len)",
            )
        _check_json(value, where=f"{where}.engine.{key}", spec=spec, at=("engine", key))
        out[key] = value
    return out


def _check_json(value: Any, *, where: str, spec: Path, at: tuple[str | int, ...] = ()) -> None:
    """model.json is JSON: refuse what YAML can hold but JSON cannot (dates, NaN, odd keys)."""
    if value is None or isinstance(value, bool | int | str):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise SpecError(
                f"{where}: {value} cannot be written to JSON", file=spec, line=_line(spec, where, *at)
            )
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            _check_json(item, where=f"{where}[{i}]", spec=spec, at=(*at, i))
        return
    if isinstance(value, Mapping):
        for k, item in value.items():
            if not isinstance(k, str):
                raise SpecError(
                    f"{where}: key {k!r} must be a string in JSON", file=spec, line=_line(spec, where, *at)
                )
            _check_json(item, where=f"{where}.{k}", spec=spec, at=(*at, k))
        return
    raise SpecError(
        f"{where}: a {type(value).__name__} cannot be written to model.json",
        file=spec,
        line=_line(spec, where, *at),
        hint="quote it to make it a string",
    )


def _model(
    raw: Any, engine: Mapping[str, Any], *, base: Path, where: str, spec: Path
) -> tuple[Path | None, str | None]:
    if raw is None:
        if "model" not in engine:
            raise SpecError(
                f"{where}: a vLLM stage needs 'model': a local Hugging Face model directory or a hub id",
                file=spec,
                line=_line(spec, where),
                hint="e.g. model: tiny_llm/ (relative to the spec) or model: facebook/opt-125m",
            )
        return None, None  # engine.model is written as given
    if "model" in engine:
        raise SpecError(
            f"{where}: give the model once, as 'model:' or as 'engine.model', not both",
            file=spec,
            line=_line(spec, where, "model"),
        )
    if not isinstance(raw, str) or not raw.strip():
        raise SpecError(
            f"{where}.model must be a path or a hub id, got {raw!r}",
            file=spec,
            line=_line(spec, where, "model"),
        )
    path = Path(raw) if Path(raw).is_absolute() else (base / raw)
    if path.is_dir():
        model_dir = path.resolve()
        if not (model_dir / "config.json").is_file():
            raise SpecError(
                f"{where}.model: {model_dir} has no config.json; it is not a Hugging Face model directory",
                file=spec,
                line=_line(spec, where, "model"),
                hint="point 'model' at the directory save_pretrained() wrote",
            )
        if not has_tokenizer(model_dir) and not _tokenizer_elsewhere(engine):
            raise SpecError(
                f"{where}.model: {model_dir} has no tokenizer ({', '.join(TOKENIZER_FILES[:3])}, ...)",
                file=spec,
                line=_line(spec, where, "model"),
                hint="save the tokenizer into the same directory (tokenizer.save_pretrained), or set "
                "engine.tokenizer / engine.skip_tokenizer_init",
            )
        return model_dir, None
    if path.exists():
        raise SpecError(
            f"{where}.model: {path} is a file, expected a model directory",
            file=spec,
            line=_line(spec, where, "model"),
        )
    if Path(raw).is_absolute() or raw.startswith(".") or not _HUB_ID.match(raw):
        raise SpecError(
            f"{where}.model: directory not found: {path}",
            file=spec,
            line=_line(spec, where, "model"),
            hint="fix the path (relative to the spec file), or give a Hugging Face hub id such as org/name",
        )
    return None, raw


def _tokenizer_elsewhere(engine: Mapping[str, Any]) -> bool:
    return bool(engine.get("tokenizer")) or str(engine.get("skip_tokenizer_init", "")).lower() == "true"


def _lora(raw: Any, engine: Mapping[str, Any], *, base: Path, where: str, spec: Path) -> dict[str, Path]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping) or not raw:
        raise SpecError(
            f"{where}.lora must map LoRA names to adapter directories",
            file=spec,
            line=_line(spec, where, "lora"),
        )
    if str(engine.get("enable_lora", "")).lower() != "true":
        raise SpecError(
            f"{where}: 'lora' needs engine.enable_lora: true",
            file=spec,
            line=_line(spec, where, "lora"),
            hint="NVIDIA's backend reads multi_lora.json only when enable_lora is on",
        )
    out: dict[str, Path] = {}
    for name, value in raw.items():
        if not isinstance(name, str) or not _LORA_NAME.match(name):
            raise SpecError(
                f"{where}.lora: {name!r} is not a plain LoRA name (letters, digits, '_', '-', '.')",
                file=spec,
                line=_line(spec, where, "lora"),
            )
        if not isinstance(value, str) or not value:
            raise SpecError(
                f"{where}.lora.{name} must be a directory path, got {value!r}",
                file=spec,
                line=_line(spec, where, "lora", name),
            )
        path = Path(value) if Path(value).is_absolute() else base / value
        if not path.is_dir():
            raise SpecError(
                f"{where}.lora.{name}: adapter directory not found: {path}",
                file=spec,
                line=_line(spec, where, "lora", name),
                hint="fix the path (relative to the spec file)",
            )
        if not (path / "adapter_config.json").is_file():
            raise SpecError(
                f"{where}.lora.{name}: {path} has no adapter_config.json; vLLM loads PEFT adapters",
                file=spec,
                line=_line(spec, where, "lora", name),
            )
        out[name] = path.resolve()
    return out


def _additional_outputs(raw: Any, *, where: str, spec: Path) -> tuple[str, ...]:
    if raw is None:
        return ()
    if raw == "all":
        return tuple(ADDITIONAL_OUTPUTS)
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise SpecError(
            f"{where}.additional_outputs must be a list of output names or 'all'",
            file=spec,
            line=_line(spec, where, "additional_outputs"),
            hint=f"known: {', '.join(ADDITIONAL_OUTPUTS)}",
        )
    unknown = [x for x in raw if x not in ADDITIONAL_OUTPUTS]
    if unknown:
        raise SpecError(
            f"{where}.additional_outputs: unknown {', '.join(unknown)}",
            file=spec,
            line=_line(spec, where, "additional_outputs"),
            hint=f"NVIDIA's vLLM backend has: {', '.join(ADDITIONAL_OUTPUTS)}",
        )
    # config order follows the backend's own, whatever order the spec lists them in
    return tuple(name for name in ADDITIONAL_OUTPUTS if name in raw)


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
