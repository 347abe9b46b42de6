"""`tritonkit perf` input generation for an LLM entry point (the TensorRT-LLM ensemble/BLS contract).

The signatures come from the layout tritonkit builds (the reviewed golden configs), read the way
perf reads a live server's metadata.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tritonkit.config import data_type_name, read_config
from tritonkit.perf.inputs import LLM_MAX_TOKENS, LLM_PROMPT, generate_requests, is_llm_entry_point
from tritonkit.signature import ModelSignature, TensorInfo

GOLDEN = Path(__file__).parents[1] / "fixtures" / "trtllm" / "text"


def _signature(name: str) -> ModelSignature:
    cfg = read_config(GOLDEN / f"{name}.pbtxt")
    inputs = tuple(
        TensorInfo(
            i.name,
            data_type_name(i.data_type).removeprefix("TYPE_").replace("STRING", "BYTES"),
            tuple(i.dims),
            i.optional,
        )
        for i in cfg.input
    )
    return ModelSignature(
        name=name,
        version="1",
        max_batch_size=cfg.max_batch_size,
        inputs=inputs,
        outputs=(),
        decoupled=cfg.model_transaction_policy.decoupled,
    )


def test_ensemble_entry_point_gets_a_prompt_an_output_length_and_no_random_sampling() -> None:
    model = _signature("decoder")
    assert is_llm_entry_point(model)
    (request,) = generate_requests(model, batch_size=2)
    assert set(request) == {"text_input", "max_tokens", "stream"}
    assert request["text_input"].shape == (2, 1) and request["text_input"][0, 0] == LLM_PROMPT.encode()
    assert request["max_tokens"].dtype == np.int32 and (request["max_tokens"] == LLM_MAX_TOKENS).all()


def test_stream_follows_the_models_transaction_policy() -> None:
    decoupled_bls = _signature("decoder_bls")  # decoupled, max_batch_size 0
    (request,) = generate_requests(decoupled_bls)
    assert request["stream"].shape == (1,) and bool(request["stream"][0]) is True
    plain = ModelSignature(
        name="plain", version="1", max_batch_size=0, inputs=decoupled_bls.inputs, outputs=(), decoupled=False
    )
    (request,) = generate_requests(plain)
    assert bool(request["stream"][0]) is False


def test_models_without_text_input_and_max_tokens_are_generated_as_before() -> None:
    model = ModelSignature(
        name="m",
        version="1",
        max_batch_size=0,
        inputs=(TensorInfo("text_input", "BYTES", (1,)), TensorInfo("beam_width", "INT32", (1,), True)),
        outputs=(),
    )
    assert not is_llm_entry_point(model)
    (request,) = generate_requests(model)
    assert set(request) == {"text_input", "beam_width"}
