"""openai_parameters (a spec's openai: key -> config parameters) and reading them back."""

from __future__ import annotations

from typing import Any

import pytest

from tritonkit.errors import SpecError
from tritonkit.openai_front import PipelineMapping, openai_parameters
from tritonkit.openai_front.mapping import llm_engine, pipeline_mapping
from tritonkit.signature import ModelSignature, TensorInfo

VLM = {
    "text_input": "TEXT_QUERY",
    "image_input": "RAW_IMAGE",
    "max_tokens_input": "MAX_TOKENS",
    "text_output": "GENERATED_TEXT",
    "stream": True,
}
INPUTS = ["RAW_IMAGE", "TEXT_QUERY", "MAX_TOKENS"]
USAGE = {
    "prompt_tokens_output": "PROMPT_TOKENS",
    "completion_tokens_output": "COMPLETION_TOKENS",
    "finish_reason_output": "FINISH_REASON",
}


def _signature(inputs: list[str], outputs: list[str], name: str = "m") -> ModelSignature:
    return ModelSignature(
        name=name,
        version="",
        max_batch_size=0,
        inputs=tuple(TensorInfo(n, "BYTES", (1,)) for n in inputs),
        outputs=tuple(TensorInfo(n, "BYTES", (1,)) for n in outputs),
    )


def test_openai_parameters_writes_one_prefixed_string_per_key() -> None:
    params = openai_parameters(
        VLM, model="vlm_llm", inputs=INPUTS, outputs=["GENERATED_TEXT"], decoupled=True
    )
    assert params == {
        "openai.text_input": "TEXT_QUERY",
        "openai.image_input": "RAW_IMAGE",
        "openai.max_tokens_input": "MAX_TOKENS",
        "openai.text_output": "GENERATED_TEXT",
        "openai.stream": "true",
    }


def test_openai_parameters_stream_defaults_to_whether_the_model_is_decoupled() -> None:
    plain = {"text_input": "Q", "text_output": "A"}
    assert openai_parameters(plain, decoupled=False)["openai.stream"] == "false"
    assert openai_parameters(plain, decoupled=True)["openai.stream"] == "true"


@pytest.mark.parametrize(
    ("mapping", "kwargs", "words"),
    [
        ("TEXT_QUERY", {}, "must be a mapping"),
        ({"text_input": "Q"}, {}, "lacks text_output"),
        ({**VLM, "image": "RAW_IMAGE"}, {}, "unknown openai key(s) 'image'"),
        ({**VLM, "text_input": ""}, {}, "must name a tensor"),
        ({**VLM, "text_input": 3}, {}, "must name a tensor"),
        ({**VLM, "stream": "maybe"}, {}, "must be true or false"),
        ({**VLM, "text_input": "QUERY"}, {"inputs": INPUTS}, "names input 'QUERY'"),
        ({**VLM, "text_output": "TEXT"}, {"outputs": ["GENERATED_TEXT"]}, "names output 'TEXT'"),
        ({**VLM, "image_input": "TEXT_QUERY"}, {}, "names one input twice"),
        ({**VLM, "sampling_parameters_input": "MAX_TOKENS"}, {}, "names one input twice"),
        ({**VLM, "sampling_parameters_input": "SAMPLING"}, {"inputs": INPUTS}, "names input 'SAMPLING'"),
        ({**VLM, "prompt_tokens_output": "P"}, {}, "one token count output without the other"),
        ({**VLM, **USAGE, "completion_tokens_output": "GENERATED_TEXT"}, {}, "names one output twice"),
        ({**VLM, **USAGE}, {"outputs": ["GENERATED_TEXT"]}, "names output 'PROMPT_TOKENS'"),
        (VLM, {"decoupled": False}, "is not decoupled"),
    ],
    ids=[
        "not-a-mapping",
        "missing-output",
        "unknown-key",
        "empty-name",
        "not-a-string",
        "bad-stream",
        "no-such-input",
        "no-such-output",
        "input-twice",
        "sampling-input-twice",
        "no-such-sampling-input",
        "one-count-alone",
        "output-twice",
        "no-such-count-output",
        "stream-vs-decoupled",
    ],
)
def test_openai_parameters_refuses_a_wrong_mapping_naming_model_and_key(
    mapping: Any, kwargs: dict[str, Any], words: str
) -> None:
    with pytest.raises(SpecError) as caught:
        openai_parameters(mapping, model="vlm_llm", **kwargs)
    assert words in caught.value.message and "vlm_llm" in caught.value.message


def test_pipeline_mapping_reads_the_parameters_as_triton_returns_the_config() -> None:
    params = openai_parameters(VLM)
    config = {"config": {"parameters": {k: {"string_value": v} for k, v in params.items()}}}
    signature = _signature(INPUTS, ["GENERATED_TEXT"], "vlm_llm")
    assert pipeline_mapping(config, signature) == PipelineMapping(
        text_input="TEXT_QUERY",
        text_output="GENERATED_TEXT",
        image_input="RAW_IMAGE",
        max_tokens_input="MAX_TOKENS",
        stream=True,
    )


def test_pipeline_mapping_reads_the_usage_outputs_a_counting_pipeline_declares() -> None:
    params = openai_parameters({**VLM, **USAGE})
    config = {"config": {"parameters": {k: {"string_value": v} for k, v in params.items()}}}
    signature = _signature(INPUTS, ["GENERATED_TEXT", *USAGE.values()], "vlm_llm")
    mapping = pipeline_mapping(config, signature)
    assert mapping is not None and mapping.counts_tokens
    assert mapping.usage_outputs == ("PROMPT_TOKENS", "COMPLETION_TOKENS", "FINISH_REASON")
    plain = pipeline_mapping(
        {"parameters": {k: {"string_value": v} for k, v in openai_parameters(VLM).items()}}, signature
    )
    assert plain is not None and not plain.counts_tokens and plain.usage_outputs == ()


def test_pipeline_mapping_reads_the_sampling_input_a_pipeline_declares() -> None:
    mapping = {**VLM, "sampling_parameters_input": "SAMPLING_PARAMETERS"}
    params = openai_parameters(mapping, inputs=[*INPUTS, "SAMPLING_PARAMETERS"], outputs=["GENERATED_TEXT"])
    assert params["openai.sampling_parameters_input"] == "SAMPLING_PARAMETERS"
    config = {"parameters": {k: {"string_value": v} for k, v in params.items()}}
    read = pipeline_mapping(config, _signature([*INPUTS, "SAMPLING_PARAMETERS"], ["GENERATED_TEXT"]))
    assert read is not None and read.sampling_parameters_input == "SAMPLING_PARAMETERS"
    plain = pipeline_mapping(
        {"parameters": {k: {"string_value": v} for k, v in openai_parameters(VLM).items()}},
        _signature(INPUTS, ["GENERATED_TEXT"]),
    )
    assert plain is not None and plain.sampling_parameters_input is None


def test_pipeline_mapping_is_none_without_openai_parameters_and_an_error_when_they_are_wrong() -> None:
    signature = _signature(INPUTS, ["GENERATED_TEXT"])
    assert pipeline_mapping({"parameters": {"OTHER": {"string_value": "x"}}}, signature) is None
    wrong = {
        "parameters": {
            "openai.text_input": {"string_value": "NOPE"},
            "openai.text_output": {"string_value": "GENERATED_TEXT"},
        }
    }
    with pytest.raises(SpecError, match="names input 'NOPE'"):
        pipeline_mapping(wrong, signature)


def test_llm_stage_is_recognised_by_the_vllm_tensor_contract_and_its_optional_outputs() -> None:
    full = _signature(
        [
            "text_input",
            "stream",
            "sampling_parameters",
            "return_num_input_tokens",
            "return_num_output_tokens",
            "return_logprobs",
            "return_finish_reason",
        ],
        ["text_output"],
    )
    stage = llm_engine(full)
    assert stage is not None and stage.token_counts and stage.logprobs and stage.finish_reason
    bare = llm_engine(_signature(["text_input", "stream", "sampling_parameters"], ["text_output"]))
    assert bare is not None and not (bare.token_counts or bare.logprobs or bare.finish_reason)
    assert llm_engine(_signature(INPUTS, ["GENERATED_TEXT"])) is None
