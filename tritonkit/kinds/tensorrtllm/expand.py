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

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tritonkit.errors import SpecError
from tritonkit.kinds.entry import refuse_unknown_keys
from tritonkit.kinds.paths import DEFAULT_SERVING_ROOT
from tritonkit.kinds.releases import TRTLLM_RELEASES, same_trtllm_release, trtllm_image
from tritonkit.kinds.tensorrtllm.engine import EngineConfigError, EngineInfo, read_engine_config
from tritonkit.kinds.tensorrtllm.models import trtllm_spec_models
from tritonkit.kinds.tensorrtllm.parameters import TRTLLM_PARAMETERS, parameter_problem
from tritonkit.kinds.tensorrtllm.spec import (
    BATCHING,
    INSTANCE_ROLES,
    LORA_KEYS,
    SPEC_KEYS,
    TrtllmSpec,
)

__all__ = ["expand_trtllm_spec"]


def expand_trtllm_spec(
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
    llm = _parse(raw, base=base, spec=spec)
    return trtllm_spec_models(llm)


def _parse(raw: Mapping[str, Any], *, base: Path, spec: Path) -> TrtllmSpec:
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise SpecError("a tensorrtllm stage needs a 'name'", file=spec)
    where = f"model '{name}'"

    def fail(message: str, hint: str | None = None) -> SpecError:
        return SpecError(f"{where}: {message}", file=spec, hint=hint)

    refuse_unknown_keys(raw, SPEC_KEYS, what=f"{where}: unknown key(s) for a tensorrtllm stage: ", spec=spec)
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
    return TrtllmSpec(
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
    out = {role: 1 for role in INSTANCE_ROLES}
    for role, count in value.items():
        if role not in INSTANCE_ROLES:
            raise fail(f"instance_count: unknown role {role!r}", hint=f"roles: {', '.join(INSTANCE_ROLES)}")
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
    if strategy not in BATCHING:
        raise fail(f"batching_strategy must be one of {', '.join(BATCHING)}, got {strategy!r}")
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
        if not isinstance(lora, Mapping) or set(lora) - set(LORA_KEYS):
            raise fail(f"lora_cache keys: {', '.join(LORA_KEYS)}")
        if not engine.lora:
            raise fail(
                "lora_cache is set but the engine was built without the LoRA plugin "
                "(build_config.plugin_config.lora_plugin is null)",
                hint="rebuild the engine with --lora_plugin, or drop lora_cache",
            )
        params.update({LORA_KEYS[k]: _scalar(v) for k, v in lora.items()})
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
