"""A TensorRT-LLM engine directory's ``config.json``: what the build and the rules read from it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritonkit.errors import ModelImportError

__all__ = ["EngineConfigError", "EngineInfo", "read_engine_config", "triton_data_type"]

#: TensorRT-LLM dtype names (pretrained_config.dtype / logits_dtype) -> Triton's data types
_TRITON_TYPES = {"float32": "FP32", "float16": "FP16", "bfloat16": "BF16"}


def triton_data_type(dtype: str | None) -> str | None:
    """The Triton data type (``FP32``, ``FP16``, ``BF16``) of a TensorRT-LLM dtype name."""
    return _TRITON_TYPES.get(dtype) if dtype is not None else None


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
    dtype: str | None = None
    logits_dtype: str = "float32"

    @property
    def logits_datatype(self) -> str:
        """NVIDIA's ``logits_datatype`` template value: the data type of the context and
        generation logits (and draft_logits) tensors, the engine's logits dtype."""
        return triton_data_type(self.logits_dtype) or "FP32"

    @property
    def encoder_input_features_data_type(self) -> str:
        """NVIDIA's ``encoder_input_features_data_type``: the engine's own dtype (``BF16`` for
        mllama, ``FP16`` for whisper, as docs/model_config.md says)."""
        return triton_data_type(self.dtype) or "FP16"

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
        dtype=_opt(pretrained.get("dtype"), str),
        logits_dtype=_opt(pretrained.get("logits_dtype"), str) or "float32",
    )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _opt(value: Any, kind: type) -> Any:
    if kind is int:
        return value if _is_int(value) else None
    return value if isinstance(value, kind) else None
