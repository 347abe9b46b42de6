"""Fake-but-well-formed TensorRT-LLM inputs for the stage and validator tests.

TensorRT-LLM engines cannot be built or run without a GPU, so these tests use stand-ins: an
engine directory whose ``config.json`` carries the fields TensorRT-LLM's runtime reads
(gptJsonConfig.cpp: ``version``, ``pretrained_config.architecture/dtype/vocab_size/mapping``,
``build_config.max_batch_size/max_beam_width/plugin_config.lora_plugin``) beside dummy
``rank<N>.engine`` files, and a tokenizer directory with the file names a Hugging Face tokenizer has.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml


def fake_engine(
    path: Path,
    *,
    version: str | None = "0.14.0",
    tp: int = 1,
    pp: int = 1,
    max_batch_size: int = 8,
    max_beam_width: int = 1,
    lora: bool = False,
    ranks: int | None = None,
    prompt_table: int = 0,
) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {
        "pretrained_config": {
            "architecture": "Qwen2ForCausalLM",
            "dtype": "float16",
            "vocab_size": 151936,
            "mapping": {"world_size": tp * pp, "tp_size": tp, "pp_size": pp},
        },
        "build_config": {
            "max_batch_size": max_batch_size,
            "max_beam_width": max_beam_width,
            "max_num_tokens": 8192,
            "max_prompt_embedding_table_size": prompt_table,
            "plugin_config": {"lora_plugin": "auto" if lora else None, "paged_kv_cache": True},
        },
    }
    if version is not None:
        config["version"] = version
    (path / "config.json").write_text(json.dumps(config, indent=2))
    for rank in range(tp * pp if ranks is None else ranks):
        (path / f"rank{rank}.engine").write_bytes(b"\0" * 64)
    return path


def fake_tokenizer(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "Qwen2Tokenizer"}))
    (path / "tokenizer.json").write_text(json.dumps({"version": "1.0", "model": {"type": "BPE"}}))
    return path


def fake_vision_engine(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps({"builder_config": {"model_type": "qwen2_vl"}}))
    (path / "model.engine").write_bytes(b"\0" * 64)
    return path


def stage_spec(tmp: Path, *, name: str = "decoder", target: str | None = "24.10", **stage: Any) -> Path:
    """A spec with one TensorRT-LLM stage over fake engine/tokenizer dirs (created if missing)."""
    if not (tmp / "llm" / "engine").exists():
        fake_engine(tmp / "llm" / "engine")
    if not (tmp / "llm" / "tokenizer").exists():
        fake_tokenizer(tmp / "llm" / "tokenizer")
    entry: dict[str, Any] = {
        "name": name,
        "backend": "tensorrtllm",
        "engine_dir": "llm/engine",
        "tokenizer_dir": "llm/tokenizer",
        **stage,
    }
    spec: dict[str, Any] = {"name": f"{name}_spec", "models": [entry]}
    if target is not None:
        spec["target"] = target
    path = tmp / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path
