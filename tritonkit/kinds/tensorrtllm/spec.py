"""The TensorRT-LLM kind's facts and one checked stage (``TrtllmSpec``), which the models are made from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritonkit.kinds.names import TENSORRTLLM
from tritonkit.kinds.paths import local_path, served_path
from tritonkit.kinds.tensorrtllm.engine import EngineInfo

__all__ = [
    "BACKEND",
    "BLS_MODEL_PARAMETERS",
    "ENGINE_DIRNAME",
    "SPEC_KEYS",
    "TrtllmSpec",
    "is_trtllm_spec",
    "mapped_local_path",
]

#: the backend name in a config.pbtxt (and in a spec entry that describes a whole stage)
BACKEND = TENSORRTLLM
ENGINE_DIRNAME = "engine"

#: The BLS model's parameters naming the models it calls (tensorrt_llm_model_name and
#: tensorrt_llm_draft_model_name are NVIDIA's; the other two are this layout's BLS).
BLS_MODEL_PARAMETERS = (
    "tensorrt_llm_model_name",
    "tensorrt_llm_draft_model_name",
    "preprocessing_model_name",
    "postprocessing_model_name",
)

SPEC_KEYS = frozenset(
    {
        "name", "backend", "engine_dir", "tokenizer_dir", "max_batch_size", "decoupled",
        "batching_strategy", "kv_cache_free_gpu_mem_fraction", "max_queue_delay_microseconds",
        "max_queue_size", "instance_count", "gpu_device_ids", "lora_cache", "multimodal_engine_dir",
        "image_input", "entry_points", "serving_root", "parameters", "target", "version",
    }
)  # fmt: skip
INSTANCE_ROLES = ("preprocessing", "postprocessing", "bls", "multimodal_encoders")
LORA_KEYS = {
    "optimal_adapter_size": "lora_cache_optimal_adapter_size",
    "max_adapter_size": "lora_cache_max_adapter_size",
    "gpu_memory_fraction": "lora_cache_gpu_memory_fraction",
    "host_memory_bytes": "lora_cache_host_memory_bytes",
    "prefetch_dir": "lora_prefetch_dir",
}
BATCHING = ("inflight_fused_batching", "inflight_batching", "V1", "v1")


def is_trtllm_spec(raw: Any) -> bool:
    """A spec model entry that describes a whole TensorRT-LLM stage (not a hand-written config)."""
    return isinstance(raw, Mapping) and raw.get("backend") == BACKEND and "engine_dir" in raw


@dataclass(frozen=True)
class TrtllmSpec:
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
        return served_path(self.serving_root, self.model(role), self.version, dirname)


def mapped_local_path(value: str, model_dir: Path) -> Path | None:
    """The local file a served path in ``model_dir``'s config stands for, or None.

    An absolute path follows the served-path rule (:func:`tritonkit.kinds.paths.local_path`); a
    relative one is taken from the model's directory; an unfilled ``${...}`` template is None.
    """
    if not value or value.startswith("${"):
        return None
    if not Path(value).is_absolute():
        return model_dir / value
    return local_path(value, model_dir=model_dir)
