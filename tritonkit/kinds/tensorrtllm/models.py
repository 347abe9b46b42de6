"""The models one TensorRT-LLM stage expands into (raw spec entries): tokenizer, engine, detokenizer,
vision encoder, ensemble and BLS entry points."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tritonkit.errors import SpecError
from tritonkit.kinds.tensorrtllm.spec import BACKEND, ENGINE_DIRNAME, TrtllmSpec
from tritonkit.triton_side import TRITON_SIDE_DIR, TRTLLM_MODELS_DIR

__all__ = ["entry_inputs", "trtllm_spec_models"]


def trtllm_spec_models(llm: TrtllmSpec) -> list[dict[str, Any]]:
    """The spec entries (raw mappings) of ``llm``'s models, in build order."""
    entries = [_preprocessing(llm), _tensorrt_llm(llm), _postprocessing(llm)]
    if llm.vision_dir is not None:
        entries.append(_multimodal_encoders(llm))
    if "ensemble" in llm.entry_points:
        entries.append(_ensemble(llm))
    if "bls" in llm.entry_points:
        entries.append(_bls(llm))
    return entries


def _t(name: str, data_type: str, dims: Sequence[int], *, optional: bool = False) -> dict[str, Any]:
    tensor: dict[str, Any] = {"name": name, "data_type": data_type, "dims": list(dims)}
    if optional:
        tensor["optional"] = True
    return tensor


#: the served-path rule the models that read a directory import, copied beside their model.py
_SERVED_PATHS = str(TRTLLM_MODELS_DIR / "served_paths.py")


def _python(llm: TrtllmSpec, role: str, source: str, **fields: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": llm.model(role),
        "backend": "python",
        "source": str(TRTLLM_MODELS_DIR / source),
        "version": llm.version,
        "max_batch_size": llm.max_batch_size,
        "instance_group": [{"kind": "KIND_CPU", "count": llm.instances.get(role, 1)}],
        **fields,
    }
    if llm.target is not None:
        entry["target"] = llm.target
    return entry


#: the preprocessing model's inputs and the entry-point input that feeds each, with the type,
#: dims and optional flag both have (NVIDIA's ensemble wires them one to one)
_PREPROCESSING_INPUTS = (
    ("QUERY", "text_input", "BYTES", [1], False),
    ("REQUEST_OUTPUT_LEN", "max_tokens", "INT32", [1], False),
    ("BAD_WORDS_DICT", "bad_words", "BYTES", [-1], True),
    ("STOP_WORDS_DICT", "stop_words", "BYTES", [-1], True),
    ("END_ID", "end_id", "INT32", [1], True),
    ("PAD_ID", "pad_id", "INT32", [1], True),
)


def _preprocessing(llm: TrtllmSpec) -> dict[str, Any]:
    inputs = [_t(name, dtype, dims, optional=opt) for name, _, dtype, dims, opt in _PREPROCESSING_INPUTS]
    params: dict[str, Any] = {
        "tokenizer_dir": llm.served_path("preprocessing", llm.tokenizer_dir.name),
        "add_special_tokens": "true",
    }
    if llm.vision_dir is not None:
        inputs.append(_t("PROMPT_VOCAB_SIZE", "INT32", [1], optional=True))
        params["vocab_size"] = str(llm.engine.vocab_size or 0)
    return _python(
        llm,
        "preprocessing",
        "preprocessing.py",
        files=[str(llm.tokenizer_dir), _SERVED_PATHS],
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
        dynamic_batching=dict(llm.dynamic_batching),
    )


def _postprocessing(llm: TrtllmSpec) -> dict[str, Any]:
    return _python(
        llm,
        "postprocessing",
        "postprocessing.py",
        files=[str(llm.tokenizer_dir), _SERVED_PATHS],
        inputs=[_t("TOKENS_BATCH", "INT32", [-1, -1]), _t("SEQUENCE_LENGTH", "INT32", [-1])],
        outputs=[_t("OUTPUT", "BYTES", [-1])],
        parameters={
            "tokenizer_dir": llm.served_path("postprocessing", llm.tokenizer_dir.name),
            "skip_special_tokens": "true",
        },
    )


def _multimodal_encoders(llm: TrtllmSpec) -> dict[str, Any]:
    if llm.vision_dir is None:  # pragma: no cover - only called with one
        raise SpecError(f"model '{llm.name}': no multimodal_engine_dir")
    return _python(
        llm,
        "multimodal_encoders",
        "multimodal_encoders.py",
        files=[str(llm.vision_dir), _SERVED_PATHS],
        inputs=[_t("IMAGE", llm.image["data_type"], llm.image["dims"])],
        outputs=[
            _t("OUT_PROMPT_EMBEDDING_TABLE", "FP16", [-1, -1]),
            _t("OUT_PROMPT_VOCAB_SIZE", "INT32", [1]),
        ],
        parameters={"multimodal_model_path": llm.served_path("multimodal_encoders", llm.vision_dir.name)},
        dynamic_batching=dict(llm.dynamic_batching),
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
    _t("return_context_logits", "BOOL", [1], optional=True),
    _t("return_generation_logits", "BOOL", [1], optional=True),
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
        "draft_logits",
        "encoder_input_features",
    }
)
_SCALAR = frozenset(
    {
        "input_lengths", "request_output_len", "end_id", "pad_id", "beam_width", "temperature",
        "runtime_top_k", "runtime_top_p", "len_penalty", "repetition_penalty", "presence_penalty",
        "frequency_penalty", "return_log_probs", "prompt_vocab_size", "lora_task_id",
        "return_context_logits", "return_generation_logits",
    }
)  # fmt: skip


def _engine_tensor(tensor: dict[str, Any]) -> dict[str, Any]:
    out = dict(tensor)
    if tensor["name"] in _RAGGED:
        out["allow_ragged_batch"] = True
    if tensor["name"] in _SCALAR:
        out["reshape"] = []  # the batch of [1] arrives as scalars (NVIDIA's config)
    return out


def _logits_outputs(llm: TrtllmSpec) -> list[dict[str, Any]]:
    """context_logits and generation_logits, typed as NVIDIA's ``${logits_datatype}`` is filled:
    the engine's logits dtype (tensorrtllm_backend docs/model_config.md, mandatory)."""
    dtype = llm.engine.logits_datatype
    return [_t("context_logits", dtype, [-1, -1]), _t("generation_logits", dtype, [-1, -1, -1])]


def _tensorrt_llm(llm: TrtllmSpec) -> dict[str, Any]:
    typed = (
        # NVIDIA's ${logits_datatype} and ${encoder_input_features_data_type}, from the engine
        _t("draft_logits", llm.engine.logits_datatype, [-1, -1], optional=True),
        _t("encoder_input_features", llm.engine.encoder_input_features_data_type, [-1, -1], optional=True),
    )
    inputs = [_engine_tensor(t) for t in _ENGINE_INPUTS + typed + (_LORA_INPUTS if llm.engine.lora else ())]
    params = {"gpt_model_path": llm.served_path("tensorrt_llm", ENGINE_DIRNAME), **llm.trt_params}
    return {
        "name": llm.model("tensorrt_llm"),
        "backend": BACKEND,
        "source": str(llm.engine_dir),
        "version": llm.version,
        "max_batch_size": llm.max_batch_size,
        "decoupled": llm.decoupled,
        "dynamic_batching": {"preferred_batch_size": [llm.max_batch_size], **llm.dynamic_batching},
        "inputs": inputs,
        "outputs": [
            _t("output_ids", "INT32", [-1, -1]),
            _t("sequence_length", "INT32", [-1]),
            _t("cum_log_probs", "FP32", [-1]),
            _t("output_log_probs", "FP32", [-1, -1]),
            *_logits_outputs(llm),
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
        *(_t(name, dtype, dims, optional=opt) for _, name, dtype, dims, opt in _PREPROCESSING_INPUTS),
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


def _ensemble(llm: TrtllmSpec) -> dict[str, Any]:
    multimodal = llm.vision_dir is not None
    steps: list[dict[str, Any]] = []
    pre_in = {pre: entry for pre, entry, *_ in _PREPROCESSING_INPUTS}
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
    if llm.decoupled:
        llm_in["streaming"] = "stream"
    if multimodal:
        steps.append(
            {
                "model": llm.model("multimodal_encoders"),
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
            "model": llm.model("preprocessing"),
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
            "model": llm.model("tensorrt_llm"),
            "version": -1,
            "inputs": llm_in,
            "outputs": {
                "output_ids": "_TOKENS_BATCH",
                "sequence_length": "_SEQUENCE_LENGTH",
                "cum_log_probs": "cum_log_probs",
                "output_log_probs": "output_log_probs",
                "context_logits": "context_logits",
                "generation_logits": "generation_logits",
            },
        }
    )
    steps.append(
        {
            "model": llm.model("postprocessing"),
            "version": -1,
            "inputs": {"TOKENS_BATCH": "_TOKENS_BATCH", "SEQUENCE_LENGTH": "_SEQUENCE_LENGTH"},
            "outputs": {"OUTPUT": "text_output"},
        }
    )
    return {
        "name": llm.model("ensemble"),
        "platform": "ensemble",
        "version": llm.version,
        "max_batch_size": llm.max_batch_size,
        "inputs": entry_inputs(multimodal=multimodal, stream=llm.decoupled, image=llm.image),
        "outputs": _ENTRY_OUTPUTS + _logits_outputs(llm),
        "steps": steps,
    }


def _bls(llm: TrtllmSpec) -> dict[str, Any]:
    params = {
        "tensorrt_llm_model_name": llm.model("tensorrt_llm"),
        "preprocessing_model_name": llm.model("preprocessing"),
        "postprocessing_model_name": llm.model("postprocessing"),
    }
    entry = _python(
        llm,
        "bls",
        "bls.py",
        files=[str(TRITON_SIDE_DIR / "bls_streams.py")],  # see bls.py
        inputs=entry_inputs(multimodal=False, stream=llm.decoupled),
        outputs=_ENTRY_OUTPUTS + _logits_outputs(llm),
        parameters=params,
        decoupled=llm.decoupled,
    )
    entry["max_batch_size"] = 0  # one request at a time per instance; instances run concurrently
    return entry
