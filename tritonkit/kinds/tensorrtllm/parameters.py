"""Every ``tensorrt_llm`` model parameter NVIDIA documents, and what a value of each must look like."""

from __future__ import annotations

import re

__all__ = ["TRTLLM_PARAMETERS", "parameter_problem"]

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
