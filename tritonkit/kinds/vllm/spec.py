"""The vLLM kind's facts and the checked form of a spec model's vLLM keys (``VllmSpec``).

A leaf of the vLLM kind: ``ModelEntry`` names ``VllmSpec``, so this module imports no kind code.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from tritonkit.config import DataType
from tritonkit.kinds.names import VLLM

__all__ = [
    "ADDITIONAL_OUTPUTS",
    "BACKEND",
    "ENGINE_ARGS_FILE",
    "ENGINE_PACKAGE",
    "HF_MODEL_DIR",
    "LORA_DIR",
    "MULTI_LORA_FILE",
    "SHARED_KEYS",
    "STRUCTURED_OUTPUTS_PARAMETER",
    "TOKENIZER_FILES",
    "VARIANT_KEYS",
    "VLLM_KEYS",
    "VllmSpec",
    "has_tokenizer",
]

BACKEND = VLLM
#: the engine's Python package (what the LLM venv must hold)
ENGINE_PACKAGE = BACKEND
ENGINE_ARGS_FILE = "model.json"
#: config parameter: the engine's structured_outputs_config where model.json cannot carry it (a
#: target whose vLLM predates that engine argument); tritonkit's local backend reads it
STRUCTURED_OUTPUTS_PARAMETER = "STRUCTURED_OUTPUTS_CONFIG"
MULTI_LORA_FILE = "multi_lora.json"
HF_MODEL_DIR = "hf_model"
LORA_DIR = "lora"

#: spec keys only a vLLM model has (besides the shared name/version/instance_group/parameters)
VLLM_KEYS = frozenset({"model", "engine", "lora", "additional_outputs"})
#: shared spec keys a vLLM model may set; anything else (source, inputs, ...) is refused
SHARED_KEYS = frozenset(
    {"name", "backend", "version", "instance_group", "parameters", "version_policy", "variants",
     "max_batch_size", "decoupled", "target"}
)  # fmt: skip
#: keys a variant of a vLLM model may override
VARIANT_KEYS = frozenset({"instance_group", "parameters"})

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
HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*(/[A-Za-z0-9][A-Za-z0-9_.\-]*)?$")
LORA_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")


@dataclass(frozen=True, kw_only=True)
class VllmSpec:
    """The vLLM keys of one spec model, checked.

    ``model_dir`` is the local Hugging Face directory to pack (None: ``hub_id`` or the engine's
    own ``model`` is written unchanged); ``lora`` maps adapter names to their local directories.
    """

    model_dir: Path | None
    hub_id: str | None
    engine: Mapping[str, Any]
    lora: Mapping[str, Path]
    additional_outputs: tuple[str, ...]


def has_tokenizer(model_dir: Path) -> bool:
    """Whether ``model_dir`` holds a tokenizer transformers can load (any of TOKENIZER_FILES,
    or a ``*.tiktoken`` file)."""
    return any((model_dir / name).is_file() for name in TOKENIZER_FILES) or any(model_dir.glob("*.tiktoken"))
