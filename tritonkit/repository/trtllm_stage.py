"""TensorRT-LLM stages: one spec entry -> NVIDIA's inflight-batcher layout, every parameter filled.

On Triton a TensorRT-LLM model is not one directory but a small layout (NVIDIA's
``all_models/inflight_batcher_llm``; parameter tables in tensorrtllm_backend
``docs/model_config.md``): a tokenizer model, the engine model (backend ``tensorrtllm``), a
detokenizer model, an ``ensemble`` entry point (and/or a BLS model) and, for vision-language
models, a vision-encoder model. NVIDIA ships those configs as ``${...}`` templates filled by hand;
here a spec entry with ``backend: tensorrtllm`` and ``engine_dir:`` expands into ordinary spec
entries (raw mappings that go through :func:`tritonkit.repository.spec.parse_spec` like any
other), so the configs are written through tritonkit's protobuf layer and nothing is left unfilled.

Spec form (paths relative to the spec)::

    - name: decoder                      # the entry point's name; the other models get suffixes
      backend: tensorrtllm
      engine_dir: llm/engine             # trtllm-build output: config.json + rank<N>.engine
      tokenizer_dir: llm/tokenizer       # a Hugging Face tokenizer directory
      max_batch_size: 8                  # triton_max_batch_size (default: the engine's)
      decoupled: true                    # decoupled_mode: needed for stream=true requests
      batching_strategy: inflight_fused_batching   # or V1
      kv_cache_free_gpu_mem_fraction: 0.9
      max_queue_delay_microseconds: 0
      max_queue_size: 0                  # 0: unbounded
      instance_count: {preprocessing: 1, postprocessing: 1, bls: 1, multimodal_encoders: 1}
      gpu_device_ids: "0"                # ';' between instances, ',' between one instance's GPUs
      lora_cache: {gpu_memory_fraction: 0.05, host_memory_bytes: 1073741824}
      multimodal_engine_dir: llm/vision  # VLMs: the vision encoder engine (model.engine + config.json)
      image_input: {data_type: FP16, dims: [3, 448, 448]}   # VLMs: what the encoder takes
      entry_points: [ensemble]           # and/or bls
      serving_root: /models              # where the repository is mounted on the serving node
      parameters: {enable_kv_cache_reuse: true}   # any other documented tensorrt_llm parameter
      target: "24.10"                    # NGC release: nvcr.io/nvidia/tritonserver:24.10-trtllm-python-py3

The engine is copied to ``<model>/<version>/engine``, the tokenizer and vision engine
directories into their models' version directories under their own names; the C++ backend needs an
absolute ``gpt_model_path``, so it is written as ``<serving_root>/<model>/<version>/engine``
(``serving_root`` default ``/models``, NVIDIA's documented mount). The Python models written
here resolve such a path onto their own version directory when it does not exist, so the same
repository works wherever it is mounted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritonkit.config import read_config
from tritonkit.errors import ModelImportError, SpecError, TritonKitError
from tritonkit.kinds.releases import (
    TRTLLM_RELEASES,
    TrtllmRelease,
    same_trtllm_release,
    trtllm_image,
    trtllm_release,
)
from tritonkit.triton_side import TRTLLM_MODELS_DIR

__all__ = [
    "BLS_MODEL_PARAMETERS",
    "DEFAULT_SERVING_ROOT",
    "ENGINE_DIRNAME",
    "EngineInfo",
    "TRTLLM_RELEASES",
    "TrtllmRelease",
    "TRTLLM_PARAMETERS",
    "entry_inputs",
    "expand_stage",
    "mapped_local_path",
    "parameter_problem",
    "is_trtllm_stage",
    "read_engine_config",
    "trtllm_image",
    "trtllm_models",
    "trtllm_release",
]

ENGINE_DIRNAME = "engine"
DEFAULT_SERVING_ROOT = "/models"
_MODELS_DIR = TRTLLM_MODELS_DIR

#: The BLS model's parameters naming the models it calls (tensorrt_llm_model_name and
#: tensorrt_llm_draft_model_name are NVIDIA's; the other two are this layout's BLS).
BLS_MODEL_PARAMETERS = (
    "tensorrt_llm_model_name",
    "tensorrt_llm_draft_model_name",
    "preprocessing_model_name",
    "postprocessing_model_name",
)

_STAGE_KEYS = frozenset(
    {
        "name", "backend", "engine_dir", "tokenizer_dir", "max_batch_size", "decoupled",
        "batching_strategy", "kv_cache_free_gpu_mem_fraction", "max_queue_delay_microseconds",
        "max_queue_size", "instance_count", "gpu_device_ids", "lora_cache", "multimodal_engine_dir",
        "image_input", "entry_points", "serving_root", "parameters", "target", "version",
    }
)  # fmt: skip
_INSTANCE_ROLES = ("preprocessing", "postprocessing", "bls", "multimodal_encoders")
_LORA_KEYS = {
    "optimal_adapter_size": "lora_cache_optimal_adapter_size",
    "max_adapter_size": "lora_cache_max_adapter_size",
    "gpu_memory_fraction": "lora_cache_gpu_memory_fraction",
    "host_memory_bytes": "lora_cache_host_memory_bytes",
    "prefetch_dir": "lora_prefetch_dir",
}
_BATCHING = ("inflight_fused_batching", "inflight_batching", "V1", "v1")


# ----------------------------------------------------------------------------- release table


def trtllm_models(repository: Path) -> list[str]:
    """The models of ``repository`` whose config.pbtxt names the tensorrtllm backend."""
    names = []
    for config in sorted(repository.glob("*/config.pbtxt")):
        try:
            # Cheap test first: a server start runs this over every model of the repository.
            if "tensorrtllm" in config.read_text(encoding="utf-8", errors="replace") and (
                read_config(config).backend == "tensorrtllm"
            ):
                names.append(config.parent.name)
        except (OSError, TritonKitError):
            continue  # a broken config is the loader's (and `tritonkit validate`'s) to report
    return names


# ----------------------------------------------------------------------------- parameters

#: Every ``tensorrt_llm`` model parameter NVIDIA documents (tensorrtllm_backend
#: docs/model_config.md, "tensorrt_llm model" tables, and the template's ``parameters`` of
#: all_models/inflight_batcher_llm/tensorrt_llm/config.pbtxt), with the kind of value the
#: backend parses (model_state.cc: GetParameter<bool> takes true/false/True/False/TRUE/FALSE/1/0).
TRTLLM_PARAMETERS: dict[str, str] = {
    "gpt_model_type": "enum:V1,v1,inflight_batching,inflight_fused_batching",
    "gpt_model_path": "path",
    "encoder_model_path": "path",
    "max_beam_width": "int",
    "FORCE_CPU_ONLY_INPUT_TENSORS": "str",
    "max_tokens_in_paged_kv_cache": "int",
    "max_attention_window_size": "ints",
    "sink_token_length": "int",
    "batch_scheduler_policy": "enum:max_utilization,guaranteed_no_evict",
    "kv_cache_free_gpu_mem_fraction": "open_fraction",
    "cross_kv_cache_fraction": "open_fraction",
    "kv_cache_host_memory_bytes": "int",
    "kv_cache_onboard_blocks": "bool",
    "enable_trt_overlap": "bool",
    "exclude_input_in_output": "bool",
    "cancellation_check_period_ms": "int",
    "stats_check_period_ms": "int",
    "recv_poll_period_ms": "int",
    "iter_stats_max_iterations": "int",
    "request_stats_max_iterations": "int",
    "enable_kv_cache_reuse": "bool",
    "normalize_log_probs": "bool",
    "enable_chunked_context": "bool",
    "gpu_device_ids": "ids",
    "participant_ids": "ids",
    "num_nodes": "int",
    "gpu_weights_percent": "fraction",
    "lora_cache_optimal_adapter_size": "int",
    "lora_cache_max_adapter_size": "int",
    "lora_cache_gpu_memory_fraction": "fraction",
    "lora_cache_host_memory_bytes": "int",
    "lora_prefetch_dir": "str",
    "decoding_mode": "enum:top_k,top_p,top_k_top_p,beam_search,medusa,redrafter,lookahead,eagle",
    "executor_worker_path": "str",
    "lookahead_window_size": "int",
    "lookahead_ngram_size": "int",
    "lookahead_verification_set_size": "int",
    "medusa_choices": "str",
    "eagle_choices": "str",
    "enable_context_fmha_fp32_acc": "bool",
    "multi_block_mode": "bool",
    "cuda_graph_mode": "bool",
    "cuda_graph_cache_size": "int",
    "speculative_decoding_fast_logits": "bool",
    "tokenizer_dir": "str",
    "guided_decoding_backend": "enum:xgrammar",
    "xgrammar_tokenizer_info_path": "str",
    "max_num_sequences": "int",
}
_BOOLS = frozenset({"true", "True", "TRUE", "1", "false", "False", "FALSE", "0"})
_IDS = re.compile(r"^\s*\d+(\s*,\s*\d+)*\s*(;\s*\d+(\s*,\s*\d+)*\s*)*;?$")


def parameter_problem(name: str, value: str) -> tuple[str, str] | None:
    """(severity, message) when ``value`` is not what the backend parses for ``name``; None if fine.

    ``error``: the model fails to load (gpt_model_type; a KV-cache fraction not strictly between
    0 and 1, which TensorRT-LLM's executor KvCacheConfig checks); ``warning``:
    the backend logs it and silently uses its default instead (model_instance_state.cc catches
    the parse error of every optional parameter).
    """
    kind = TRTLLM_PARAMETERS.get(name)
    if kind is None:
        return None
    if value.startswith("${"):
        return None  # reported as unfilled
    fails_load = name == "gpt_model_type"
    if kind.startswith("enum:"):
        allowed = kind[5:].split(",")
        if value not in allowed:
            what = "the model fails to load" if fails_load else "the backend ignores it and uses its default"
            return (
                "error" if fails_load else "warning",
                f"'{value}' is not one of {', '.join(allowed)}: {what}",
            )
        return None
    if kind == "bool" and value not in _BOOLS:
        return ("warning", f"'{value}' is not a boolean (true/false/1/0): the backend uses its default")
    if kind == "int" and not re.fullmatch(r"\s*-?\d+\s*", value):
        return ("warning", f"'{value}' is not an integer: the backend uses its default")
    if kind == "ints" and not re.fullmatch(r"\s*\d+(\s*,\s*\d+)*\s*", value):
        return (
            "warning",
            f"'{value}' is not a comma-separated list of integers: the backend uses its default",
        )
    if kind == "ids" and value and not _IDS.match(value):
        return ("warning", f"'{value}' is not GPU ids like '0,1' ('0;1' for one GPU per instance): ignored")
    if kind in ("fraction", "open_fraction"):
        try:
            number = float(value)
        except ValueError:
            return ("warning", f"'{value}' is not a number: the backend uses its default")
        if kind == "open_fraction" and not 0.0 < number < 1.0:
            # executor KvCacheConfig: TLLM_CHECK(fraction > 0) and TLLM_CHECK(fraction < 1)
            return ("error", f"{number} is not strictly between 0 and 1: the model fails to load")
        if not 0.0 <= number <= 1.0:
            return ("warning", f"{number} is outside [0, 1] (a fraction)")
    return None


# ----------------------------------------------------------------------------- engine config


@dataclass(frozen=True)
class EngineInfo:
    """What the rules read from a trtllm-build ``config.json`` (fields as TensorRT-LLM's
    runtime parses them: ``version``, ``pretrained_config.mapping.tp_size/pp_size``,
    ``build_config.max_batch_size/max_beam_width``, ``build_config.plugin_config.lora_plugin``)."""

    path: Path
    version: str | None
    architecture: str | None
    max_batch_size: int | None
    max_beam_width: int | None
    tp_size: int
    pp_size: int
    vocab_size: int | None
    lora: bool
    max_prompt_embedding_table_size: int = 0

    @property
    def world_size(self) -> int:
        return self.tp_size * self.pp_size

    def rank_files(self) -> list[str]:
        return [f"rank{r}.engine" for r in range(self.world_size)]


class EngineConfigError(ModelImportError):
    """The engine's config.json is missing, not JSON, or lacks a field the runtime requires
    (an unreadable model file, so a ModelImportError)."""


def read_engine_config(engine_dir: Path) -> EngineInfo:
    path = engine_dir / "config.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise EngineConfigError(f"{path} does not exist (trtllm-build writes it beside the engines)") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise EngineConfigError(f"{path} cannot be read as JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise EngineConfigError(f"{path} is not a JSON object")
    pretrained = data.get("pretrained_config")
    build = data.get("build_config")
    if not isinstance(pretrained, dict) or not isinstance(build, dict):
        raise EngineConfigError(
            f"{path} has no 'pretrained_config'/'build_config' (an engine from the pre-0.8 builder "
            "or not a trtllm-build output)"
        )
    mapping = pretrained.get("mapping")
    if not isinstance(mapping, dict) or not _is_int(mapping.get("tp_size")):
        raise EngineConfigError(f"{path}: pretrained_config.mapping.tp_size is missing")
    plugins = build.get("plugin_config")
    version = data.get("version")
    return EngineInfo(
        path=path,
        version=str(version) if version is not None else None,
        architecture=_opt(pretrained.get("architecture"), str),
        max_batch_size=_opt(build.get("max_batch_size"), int),
        max_beam_width=_opt(build.get("max_beam_width"), int),
        tp_size=int(mapping["tp_size"]),
        pp_size=int(mapping.get("pp_size", 1)) if _is_int(mapping.get("pp_size", 1)) else 1,
        vocab_size=_opt(pretrained.get("vocab_size"), int),
        lora=isinstance(plugins, dict) and plugins.get("lora_plugin") is not None,
        max_prompt_embedding_table_size=_opt(build.get("max_prompt_embedding_table_size"), int) or 0,
    )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _opt(value: Any, kind: type) -> Any:
    if kind is int:
        return value if _is_int(value) else None
    return value if isinstance(value, kind) else None


# ----------------------------------------------------------------------------- spec expansion


def is_trtllm_stage(raw: Any) -> bool:
    """A spec model entry that describes a whole TensorRT-LLM stage (not a hand-written config)."""
    return isinstance(raw, Mapping) and raw.get("backend") == "tensorrtllm" and "engine_dir" in raw


@dataclass(frozen=True)
class _Stage:
    name: str
    engine_dir: Path
    tokenizer_dir: Path
    vision_dir: Path | None
    engine: EngineInfo
    max_batch_size: int
    decoupled: bool
    version: int
    serving_root: str
    entry_points: tuple[str, ...]
    instances: Mapping[str, int]
    image: Mapping[str, Any]
    trt_params: Mapping[str, str]
    dynamic_batching: Mapping[str, Any]
    target: str | None

    def model(self, role: str) -> str:
        if role == "ensemble" or (role == "bls" and "ensemble" not in self.entry_points):
            return self.name
        return f"{self.name}_{role}"

    def served_path(self, role: str, dirname: str) -> str:
        return f"{self.serving_root.rstrip('/')}/{self.model(role)}/{self.version}/{dirname}"


def expand_stage(
    raw: Mapping[str, Any],
    *,
    base: Path,
    spec: Path,
    default_target: str | None = None,
    default_serving_root: str | None = None,
) -> list[dict[str, Any]]:
    """The spec entries (raw mappings, paths absolute) that make up one TensorRT-LLM stage
    (``default_target``: the spec's own ``target``; ``default_serving_root``: the build's
    ``--serving-root``; a stage's own keys win)."""
    if default_target is not None and "target" not in raw:
        raw = {**raw, "target": default_target}
    if default_serving_root is not None and "serving_root" not in raw:
        raw = {**raw, "serving_root": default_serving_root}
    stage = _parse(raw, base=base, spec=spec)
    entries = [_preprocessing(stage), _tensorrt_llm(stage), _postprocessing(stage)]
    if stage.vision_dir is not None:
        entries.append(_multimodal_encoders(stage))
    if "ensemble" in stage.entry_points:
        entries.append(_ensemble(stage))
    if "bls" in stage.entry_points:
        entries.append(_bls(stage))
    return entries


def _parse(raw: Mapping[str, Any], *, base: Path, spec: Path) -> _Stage:
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise SpecError("a tensorrtllm stage needs a 'name'", file=spec)
    where = f"model '{name}'"

    def fail(message: str, hint: str | None = None) -> SpecError:
        return SpecError(f"{where}: {message}", file=spec, hint=hint)

    unknown = sorted(str(k) for k in raw if k not in _STAGE_KEYS)
    if unknown:
        raise fail(
            f"unknown key(s) for a tensorrtllm stage: {', '.join(unknown)}",
            hint=f"allowed keys: {', '.join(sorted(_STAGE_KEYS))}",
        )
    engine_dir = _dir(raw.get("engine_dir"), base, "engine_dir", fail)
    if "tokenizer_dir" not in raw:
        raise fail("needs 'tokenizer_dir' (the Hugging Face tokenizer the engine was built for)")
    tokenizer_dir = _dir(raw.get("tokenizer_dir"), base, "tokenizer_dir", fail)
    vision_dir = None
    if raw.get("multimodal_engine_dir") is not None:
        vision_dir = _dir(raw["multimodal_engine_dir"], base, "multimodal_engine_dir", fail)
    try:
        engine = read_engine_config(engine_dir)
    except EngineConfigError as exc:
        raise fail(str(exc), hint="point engine_dir at the directory trtllm-build wrote") from exc
    missing = [f for f in engine.rank_files() if not (engine_dir / f).is_file()]
    if missing:
        raise fail(
            f"engine_dir {engine_dir} lacks {', '.join(missing)} (tp_size*pp_size = {engine.world_size})",
            hint="copy every rank's engine file trtllm-build wrote",
        )
    if vision_dir is not None and engine.max_prompt_embedding_table_size <= 0:
        raise fail(
            "multimodal_engine_dir is set but the LLM engine takes no prompt table "
            "(build_config.max_prompt_embedding_table_size is 0): the image embeddings cannot reach it",
            hint="rebuild the LLM engine with --max_prompt_embedding_table_size (docs/multimodal.md)",
        )
    mbs = _int(raw.get("max_batch_size", engine.max_batch_size or 1), "max_batch_size", fail, low=1)
    decoupled = raw.get("decoupled", False)
    if not isinstance(decoupled, bool):
        raise fail(f"decoupled must be true or false, got {decoupled!r}")
    entry_points = _entry_points(raw.get("entry_points", ["ensemble"]), fail)
    params = _trt_params(raw, engine, fail)
    batching: dict[str, Any] = {
        "max_queue_delay_microseconds": _int(
            raw.get("max_queue_delay_microseconds", 0), "max_queue_delay_microseconds", fail, low=0
        )
    }
    queue = _int(raw.get("max_queue_size", 0), "max_queue_size", fail, low=0)
    if queue:
        batching["default_queue_policy"] = {"max_queue_size": queue}
    root = raw.get("serving_root", DEFAULT_SERVING_ROOT)
    if not isinstance(root, str) or not root.startswith("/"):
        raise fail(f"serving_root must be an absolute path, got {root!r}")
    target = _target(raw.get("target"), engine, fail)
    version = raw.get("version", 1)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise fail(f"version must be a positive integer, got {version!r}")
    return _Stage(
        name=name,
        engine_dir=engine_dir,
        tokenizer_dir=tokenizer_dir,
        vision_dir=vision_dir,
        engine=engine,
        max_batch_size=mbs,
        decoupled=decoupled,
        version=version,
        serving_root=root,
        entry_points=entry_points,
        instances=_instances(raw.get("instance_count", {}), fail),
        image=_image_input(raw.get("image_input"), vision_dir is not None, fail),
        trt_params=params,
        dynamic_batching=batching,
        target=target,
    )


def _target(value: Any, engine: EngineInfo, fail: Any) -> str | None:
    """The stage's NGC release, refused when its image's TensorRT-LLM cannot load the engine."""
    if value is None:
        return None
    target = str(value)
    if target not in TRTLLM_RELEASES:
        raise fail(
            f"target {target!r} has no -trtllm-python-py3 image in tritonkit's table",
            hint=f"known: {', '.join(TRTLLM_RELEASES)}",
        )
    if engine.version is not None:
        runtime = TRTLLM_RELEASES[target].trtllm
        if same_trtllm_release(engine.version, runtime) is False:
            raise fail(
                f"the engine was built by TensorRT-LLM {engine.version} but target {target}'s "
                f"{trtllm_image(target)} runs {runtime}",
                hint="rebuild the engine with that TensorRT-LLM, or pick the release that runs yours",
            )
    return target


def _dir(value: Any, base: Path, key: str, fail: Any) -> Path:
    if not isinstance(value, str) or not value:
        raise fail(f"{key} must be a path (relative to the spec), got {value!r}")
    path = Path(value) if Path(value).is_absolute() else (base / value).resolve()
    if not path.is_dir():
        raise fail(f"{key} {path} is not a directory", hint="fix the path (relative to the spec file)")
    return path


def _int(value: Any, key: str, fail: Any, *, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise fail(f"{key} must be an integer >= {low}, got {value!r}")
    return value


def _entry_points(value: Any, fail: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or any(v not in ("ensemble", "bls") for v in value):
        raise fail(f"entry_points must list 'ensemble' and/or 'bls', got {value!r}")
    return tuple(dict.fromkeys(value))


def _instances(value: Any, fail: Any) -> dict[str, int]:
    if not isinstance(value, Mapping):
        raise fail("instance_count must map roles (preprocessing, postprocessing, bls, ...) to counts")
    out = {role: 1 for role in _INSTANCE_ROLES}
    for role, count in value.items():
        if role not in _INSTANCE_ROLES:
            raise fail(f"instance_count: unknown role {role!r}", hint=f"roles: {', '.join(_INSTANCE_ROLES)}")
        out[role] = _int(count, f"instance_count.{role}", fail, low=1)
    return out


def _image_input(value: Any, multimodal: bool, fail: Any) -> dict[str, Any]:
    if value is None:
        return {"data_type": "FP16", "dims": [3, -1, -1]}
    if not multimodal:
        raise fail("image_input is only for a stage with multimodal_engine_dir")
    if not isinstance(value, Mapping) or set(value) - {"data_type", "dims"}:
        raise fail("image_input must be {data_type: FP16, dims: [3, H, W]}")
    return {"data_type": value.get("data_type", "FP16"), "dims": list(value.get("dims", [3, -1, -1]))}


def _trt_params(raw: Mapping[str, Any], engine: EngineInfo, fail: Any) -> dict[str, str]:
    strategy = raw.get("batching_strategy", "inflight_fused_batching")
    if strategy not in _BATCHING:
        raise fail(f"batching_strategy must be one of {', '.join(_BATCHING)}, got {strategy!r}")
    params: dict[str, str] = {
        "gpt_model_type": strategy,
        "max_beam_width": str(engine.max_beam_width or 1),
        "batch_scheduler_policy": "guaranteed_no_evict",
        "exclude_input_in_output": "true",
    }
    if "kv_cache_free_gpu_mem_fraction" in raw:
        params["kv_cache_free_gpu_mem_fraction"] = _scalar(raw["kv_cache_free_gpu_mem_fraction"])
    if "gpu_device_ids" in raw:
        params["gpu_device_ids"] = _scalar(raw["gpu_device_ids"])
    lora = raw.get("lora_cache")
    if lora is not None:
        if not isinstance(lora, Mapping) or set(lora) - set(_LORA_KEYS):
            raise fail(f"lora_cache keys: {', '.join(_LORA_KEYS)}")
        if not engine.lora:
            raise fail(
                "lora_cache is set but the engine was built without the LoRA plugin "
                "(build_config.plugin_config.lora_plugin is null)",
                hint="rebuild the engine with --lora_plugin, or drop lora_cache",
            )
        params.update({_LORA_KEYS[k]: _scalar(v) for k, v in lora.items()})
    extra = raw.get("parameters") or {}
    if not isinstance(extra, Mapping):
        raise fail("parameters must map tensorrt_llm parameter names to values")
    for key, value in extra.items():
        if key in ("gpt_model_path", "gpt_model_type"):
            raise fail(f"parameters.{key} is written by tritonkit (engine_dir, batching_strategy)")
        if key not in TRTLLM_PARAMETERS:
            raise fail(
                f"parameters.{key} is not a tensorrt_llm parameter NVIDIA documents",
                hint=_suggest(str(key), TRTLLM_PARAMETERS),
            )
        params[str(key)] = _scalar(value)
    for key, value in params.items():
        problem = parameter_problem(key, value)
        if problem is not None:
            raise fail(f"{key}: {problem[1]}")
    return params


def _suggest(name: str, known: Sequence[str] | frozenset[str] | Mapping[str, Any]) -> str:
    import difflib

    close = difflib.get_close_matches(name, list(known), n=1)
    return f"did you mean '{close[0]}'?" if close else "see tensorrtllm_backend docs/model_config.md"


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# ----------------------------------------------------------------------------- the models


def _t(name: str, data_type: str, dims: Sequence[int], *, optional: bool = False) -> dict[str, Any]:
    tensor: dict[str, Any] = {"name": name, "data_type": data_type, "dims": list(dims)}
    if optional:
        tensor["optional"] = True
    return tensor


def _python(stage: _Stage, role: str, source: str, **fields: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": stage.model(role),
        "backend": "python",
        "source": str(_MODELS_DIR / source),
        "version": stage.version,
        "max_batch_size": stage.max_batch_size,
        "instance_group": [{"kind": "KIND_CPU", "count": stage.instances.get(role, 1)}],
        **fields,
    }
    if stage.target is not None:
        entry["target"] = stage.target
    return entry


def _preprocessing(stage: _Stage) -> dict[str, Any]:
    inputs = [
        _t("QUERY", "BYTES", [1]),
        _t("REQUEST_OUTPUT_LEN", "INT32", [1]),
        _t("BAD_WORDS_DICT", "BYTES", [-1], optional=True),
        _t("STOP_WORDS_DICT", "BYTES", [-1], optional=True),
        _t("END_ID", "INT32", [1], optional=True),
        _t("PAD_ID", "INT32", [1], optional=True),
    ]
    params: dict[str, Any] = {
        "tokenizer_dir": stage.served_path("preprocessing", stage.tokenizer_dir.name),
        "add_special_tokens": "true",
    }
    if stage.vision_dir is not None:
        inputs.append(_t("PROMPT_VOCAB_SIZE", "INT32", [1], optional=True))
        params["vocab_size"] = str(stage.engine.vocab_size or 0)
    return _python(
        stage,
        "preprocessing",
        "preprocessing.py",
        files=[str(stage.tokenizer_dir)],
        inputs=inputs,
        outputs=[
            _t("INPUT_ID", "INT32", [-1]),
            _t("REQUEST_INPUT_LEN", "INT32", [1]),
            _t("BAD_WORDS_IDS", "INT32", [2, -1]),
            _t("STOP_WORDS_IDS", "INT32", [2, -1]),
            _t("REQUEST_OUTPUT_LEN", "INT32", [1]),
            _t("OUT_END_ID", "INT32", [1]),
            _t("OUT_PAD_ID", "INT32", [1]),
        ],
        parameters=params,
        dynamic_batching=dict(stage.dynamic_batching),
    )


def _postprocessing(stage: _Stage) -> dict[str, Any]:
    return _python(
        stage,
        "postprocessing",
        "postprocessing.py",
        files=[str(stage.tokenizer_dir)],
        inputs=[_t("TOKENS_BATCH", "INT32", [-1, -1]), _t("SEQUENCE_LENGTH", "INT32", [-1])],
        outputs=[_t("OUTPUT", "BYTES", [-1])],
        parameters={
            "tokenizer_dir": stage.served_path("postprocessing", stage.tokenizer_dir.name),
            "skip_special_tokens": "true",
        },
    )


def _multimodal_encoders(stage: _Stage) -> dict[str, Any]:
    if stage.vision_dir is None:  # pragma: no cover - only called with one
        raise SpecError(f"model '{stage.name}': no multimodal_engine_dir")
    return _python(
        stage,
        "multimodal_encoders",
        "multimodal_encoders.py",
        files=[str(stage.vision_dir)],
        inputs=[_t("IMAGE", stage.image["data_type"], stage.image["dims"])],
        outputs=[
            _t("OUT_PROMPT_EMBEDDING_TABLE", "FP16", [-1, -1]),
            _t("OUT_PROMPT_VOCAB_SIZE", "INT32", [1]),
        ],
        parameters={"multimodal_model_path": stage.served_path("multimodal_encoders", stage.vision_dir.name)},
        dynamic_batching=dict(stage.dynamic_batching),
    )


#: inputs of the engine model this layout feeds (tensorrtllm_backend docs/model_config.md,
#: "Unique Inputs for tensorrt_llm model" and "Common Inputs")
_ENGINE_INPUTS = (
    _t("input_ids", "INT32", [-1]),
    _t("input_lengths", "INT32", [1]),
    _t("request_output_len", "INT32", [1]),
    _t("end_id", "INT32", [1], optional=True),
    _t("pad_id", "INT32", [1], optional=True),
    _t("stop_words_list", "INT32", [2, -1], optional=True),
    _t("bad_words_list", "INT32", [2, -1], optional=True),
    _t("beam_width", "INT32", [1], optional=True),
    _t("temperature", "FP32", [1], optional=True),
    _t("runtime_top_k", "INT32", [1], optional=True),
    _t("runtime_top_p", "FP32", [1], optional=True),
    _t("len_penalty", "FP32", [1], optional=True),
    _t("repetition_penalty", "FP32", [1], optional=True),
    _t("presence_penalty", "FP32", [1], optional=True),
    _t("frequency_penalty", "FP32", [1], optional=True),
    _t("return_log_probs", "BOOL", [1], optional=True),
    _t("stop", "BOOL", [1], optional=True),
    _t("streaming", "BOOL", [1], optional=True),
    _t("prompt_embedding_table", "FP16", [-1, -1], optional=True),
    _t("prompt_vocab_size", "INT32", [1], optional=True),
)
_LORA_INPUTS = (
    _t("lora_task_id", "UINT64", [1], optional=True),
    _t("lora_weights", "FP16", [-1, -1], optional=True),
    _t("lora_config", "INT32", [-1, 3], optional=True),
)
_RAGGED = frozenset(
    {
        "input_ids",
        "stop_words_list",
        "bad_words_list",
        "prompt_embedding_table",
        "lora_weights",
        "lora_config",
    }
)
_SCALAR = frozenset(
    {
        "input_lengths", "request_output_len", "end_id", "pad_id", "beam_width", "temperature",
        "runtime_top_k", "runtime_top_p", "len_penalty", "repetition_penalty", "presence_penalty",
        "frequency_penalty", "return_log_probs", "prompt_vocab_size", "lora_task_id",
    }
)  # fmt: skip


def _engine_tensor(tensor: dict[str, Any]) -> dict[str, Any]:
    out = dict(tensor)
    if tensor["name"] in _RAGGED:
        out["allow_ragged_batch"] = True
    if tensor["name"] in _SCALAR:
        out["reshape"] = []  # the batch of [1] arrives as scalars (NVIDIA's config)
    return out


def _tensorrt_llm(stage: _Stage) -> dict[str, Any]:
    inputs = [_engine_tensor(t) for t in _ENGINE_INPUTS + (_LORA_INPUTS if stage.engine.lora else ())]
    params = {"gpt_model_path": stage.served_path("tensorrt_llm", ENGINE_DIRNAME), **stage.trt_params}
    return {
        "name": stage.model("tensorrt_llm"),
        "backend": "tensorrtllm",
        "source": str(stage.engine_dir),
        "version": stage.version,
        "max_batch_size": stage.max_batch_size,
        "decoupled": stage.decoupled,
        "dynamic_batching": {"preferred_batch_size": [stage.max_batch_size], **stage.dynamic_batching},
        "inputs": inputs,
        "outputs": [
            _t("output_ids", "INT32", [-1, -1]),
            _t("sequence_length", "INT32", [-1]),
            _t("cum_log_probs", "FP32", [-1]),
            _t("output_log_probs", "FP32", [-1, -1]),
        ],
        # NVIDIA's layout: one KIND_CPU instance; the backend places its ranks on the GPUs itself
        # (gpu_device_ids, or every visible GPU).
        "instance_group": [{"kind": "KIND_CPU", "count": 1}],
        "parameters": params,
    }


#: entry-point inputs -> the engine input each feeds (tensorrtllm_backend docs/model_config.md,
#: "Unique Inputs for tensorrt_llm_bls model"; the ensemble takes the same names)
_SAMPLING = (
    ("top_k", "INT32", "runtime_top_k"),
    ("top_p", "FP32", "runtime_top_p"),
    ("temperature", "FP32", "temperature"),
    ("length_penalty", "FP32", "len_penalty"),
    ("repetition_penalty", "FP32", "repetition_penalty"),
    ("presence_penalty", "FP32", "presence_penalty"),
    ("frequency_penalty", "FP32", "frequency_penalty"),
    ("beam_width", "INT32", "beam_width"),
    ("return_log_probs", "BOOL", "return_log_probs"),
)


def entry_inputs(
    *, multimodal: bool, stream: bool, image: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The entry point's inputs; ``stream`` only where the engine model is decoupled (a request
    with stream=true fails on a unary one, so it is not offered)."""
    inputs = [
        _t("text_input", "BYTES", [1]),
        _t("max_tokens", "INT32", [1]),
        _t("bad_words", "BYTES", [-1], optional=True),
        _t("stop_words", "BYTES", [-1], optional=True),
        _t("end_id", "INT32", [1], optional=True),
        _t("pad_id", "INT32", [1], optional=True),
        *(_t(name, dtype, [1], optional=True) for name, dtype, _ in _SAMPLING),
    ]
    if stream:
        inputs.append(_t("stream", "BOOL", [1], optional=True))
    if multimodal and image is not None:
        inputs.append(_t("image_input", image["data_type"], image["dims"]))
    return inputs


_ENTRY_OUTPUTS = [
    _t("text_output", "BYTES", [-1]),
    _t("cum_log_probs", "FP32", [-1]),
    _t("output_log_probs", "FP32", [-1, -1]),
]


def _ensemble(stage: _Stage) -> dict[str, Any]:
    multimodal = stage.vision_dir is not None
    steps: list[dict[str, Any]] = []
    pre_in = {
        "QUERY": "text_input",
        "REQUEST_OUTPUT_LEN": "max_tokens",
        "BAD_WORDS_DICT": "bad_words",
        "STOP_WORDS_DICT": "stop_words",
        "END_ID": "end_id",
        "PAD_ID": "pad_id",
    }
    llm_in = {
        "input_ids": "_INPUT_ID",
        "input_lengths": "_REQUEST_INPUT_LEN",
        "request_output_len": "_REQUEST_OUTPUT_LEN",
        "end_id": "_PREPROCESSOR_END_ID",
        "pad_id": "_PREPROCESSOR_PAD_ID",
        "stop_words_list": "_STOP_WORDS_IDS",
        "bad_words_list": "_BAD_WORDS_IDS",
        **{engine: name for name, _, engine in _SAMPLING},
    }
    if stage.decoupled:
        llm_in["streaming"] = "stream"
    if multimodal:
        steps.append(
            {
                "model": stage.model("multimodal_encoders"),
                "version": -1,
                "inputs": {"IMAGE": "image_input"},
                "outputs": {
                    "OUT_PROMPT_EMBEDDING_TABLE": "_PROMPT_EMBEDDING_TABLE",
                    "OUT_PROMPT_VOCAB_SIZE": "_PROMPT_VOCAB_SIZE",
                },
            }
        )
        pre_in["PROMPT_VOCAB_SIZE"] = "_PROMPT_VOCAB_SIZE"
        llm_in["prompt_embedding_table"] = "_PROMPT_EMBEDDING_TABLE"
        llm_in["prompt_vocab_size"] = "_PROMPT_VOCAB_SIZE"
    steps.append(
        {
            "model": stage.model("preprocessing"),
            "version": -1,
            "inputs": pre_in,
            "outputs": {
                "INPUT_ID": "_INPUT_ID",
                "REQUEST_INPUT_LEN": "_REQUEST_INPUT_LEN",
                "REQUEST_OUTPUT_LEN": "_REQUEST_OUTPUT_LEN",
                "BAD_WORDS_IDS": "_BAD_WORDS_IDS",
                "STOP_WORDS_IDS": "_STOP_WORDS_IDS",
                "OUT_END_ID": "_PREPROCESSOR_END_ID",
                "OUT_PAD_ID": "_PREPROCESSOR_PAD_ID",
            },
        }
    )
    steps.append(
        {
            "model": stage.model("tensorrt_llm"),
            "version": -1,
            "inputs": llm_in,
            "outputs": {
                "output_ids": "_TOKENS_BATCH",
                "sequence_length": "_SEQUENCE_LENGTH",
                "cum_log_probs": "cum_log_probs",
                "output_log_probs": "output_log_probs",
            },
        }
    )
    steps.append(
        {
            "model": stage.model("postprocessing"),
            "version": -1,
            "inputs": {"TOKENS_BATCH": "_TOKENS_BATCH", "SEQUENCE_LENGTH": "_SEQUENCE_LENGTH"},
            "outputs": {"OUTPUT": "text_output"},
        }
    )
    return {
        "name": stage.model("ensemble"),
        "platform": "ensemble",
        "version": stage.version,
        "max_batch_size": stage.max_batch_size,
        "inputs": entry_inputs(multimodal=multimodal, stream=stage.decoupled, image=stage.image),
        "outputs": _ENTRY_OUTPUTS,
        "steps": steps,
    }


def _bls(stage: _Stage) -> dict[str, Any]:
    params = {
        "tensorrt_llm_model_name": stage.model("tensorrt_llm"),
        "preprocessing_model_name": stage.model("preprocessing"),
        "postprocessing_model_name": stage.model("postprocessing"),
    }
    entry = _python(
        stage,
        "bls",
        "bls.py",
        inputs=entry_inputs(multimodal=False, stream=stage.decoupled),
        outputs=_ENTRY_OUTPUTS,
        parameters=params,
        decoupled=stage.decoupled,
    )
    entry["max_batch_size"] = 0  # one request at a time per instance; instances run concurrently
    return entry


def mapped_local_path(value: str, model_dir: Path) -> Path | None:
    """The local file a served path in ``model_dir``'s config stands for, or None.

    ``<anything>/<model>/<version>/<rest>`` (how this module writes served paths) maps onto
    ``model_dir/<version>/<rest>``; a relative path is taken from the model's directory.
    """
    if not value or value.startswith("${"):
        return None
    path = Path(value)
    if not path.is_absolute():
        return model_dir / path
    parts = path.parts
    for i in range(len(parts) - 2):
        if parts[i] == model_dir.name and re.fullmatch(r"\d+", parts[i + 1]):
            return model_dir.joinpath(*parts[i + 1 :])
    return path if path.exists() else None
