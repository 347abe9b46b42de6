"""The KV cache tritonkit gives an engine that model.json and the environment leave unsized
(vLLM's CPU default asks for 92% of NUMA node 0).

Shipped beside ``model.py`` (the stub puts this directory on ``sys.path``); imports nothing
from tritonkit.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: the KV cache tritonkit gives an unsized engine: this share of available memory, within bounds
KV_CACHE_SHARE = 0.10
KV_CACHE_MIN_BYTES = 256 << 20
KV_CACHE_MAX_BYTES = 4 << 30


def meminfo_available_bytes() -> int | None:
    """MemAvailable from /proc/meminfo, in bytes (None where there is no such file)."""
    try:
        for line in Path("/proc/meminfo").read_text(encoding="ascii").splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def default_kv_cache_bytes(available: int | None) -> int:
    """The most KV cache tritonkit gives an unsized engine: 10% of available memory, 256 MiB..4 GiB."""
    if available is None:
        return KV_CACHE_MIN_BYTES
    return int(min(KV_CACHE_MAX_BYTES, max(KV_CACHE_MIN_BYTES, available * KV_CACHE_SHARE)))


#: vLLM's max_num_seqs when model.json does not set it (its CPU default)
DEFAULT_MAX_NUM_SEQS = 256
_DTYPE_BYTES = {"float32": 4, "float": 4, "float64": 8, "double": 8}


def kv_bytes_per_token(hf_config: dict[str, Any], dtype: str | None) -> int | None:
    """Key + value bytes one token takes in every layer, from a Hugging Face config.json."""
    try:
        layers = int(hf_config["num_hidden_layers"])
        heads = int(hf_config["num_attention_heads"])
        kv_heads = int(hf_config.get("num_key_value_heads") or heads)
        head_dim = int(hf_config.get("head_dim") or int(hf_config["hidden_size"]) // heads)
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None
    if dtype in (None, "auto"):
        dtype = hf_config.get("torch_dtype") or hf_config.get("dtype")
    name = str(dtype)
    return 2 * layers * kv_heads * head_dim * _DTYPE_BYTES.get(name.replace("torch.", ""), 2)


def engine_kv_cache_bytes(engine_config: dict[str, Any], available: int | None) -> int:
    """A KV cache for this engine on this machine: what max_num_seqs full sequences take, capped.

    The cap is default_kv_cache_bytes(available); never less than one full sequence (vLLM
    refuses a cache that cannot hold max_model_len tokens) nor 64 MiB.
    """
    cap = default_kv_cache_bytes(available)
    model = engine_config.get("model")
    hf_path = Path(model) / "config.json" if isinstance(model, str) else None
    try:
        hf_config = json.loads(hf_path.read_text(encoding="utf-8")) if hf_path and hf_path.is_file() else None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        hf_config = None
    if not isinstance(hf_config, dict):
        return cap
    per_token = kv_bytes_per_token(hf_config, engine_config.get("dtype"))
    max_len = engine_config.get("max_model_len") or hf_config.get("max_position_embeddings")
    if per_token is None or not isinstance(max_len, int):
        return cap
    sequences = int(engine_config.get("max_num_seqs") or DEFAULT_MAX_NUM_SEQS)
    one_sequence = per_token * max_len
    return int(max(64 << 20, one_sequence + (16 << 20), min(cap, one_sequence * sequences)))


def size_kv_cache(engine_config: dict[str, Any], *, model_name: str, log: Callable[[str], None]) -> None:
    """Set ``kv_cache_memory_bytes`` in ``engine_config`` unless it or VLLM_CPU_KVCACHE_SPACE sizes
    the cache already; ``log`` takes the line that tells Triton's log the size chosen."""
    if engine_config.get("kv_cache_memory_bytes") is not None:
        return
    if os.environ.get("VLLM_CPU_KVCACHE_SPACE", "") != "":
        return
    size = engine_kv_cache_bytes(engine_config, meminfo_available_bytes())
    engine_config["kv_cache_memory_bytes"] = size
    log(
        f"model '{model_name}': KV cache {size >> 20} MiB (max_num_seqs full sequences, at most "
        "10% of available memory; set kv_cache_memory_bytes in model.json or VLLM_CPU_KVCACHE_SPACE "
        "to choose)"
    )
