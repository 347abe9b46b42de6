"""Requests to LLM stages (vLLM backend) from the client and `tritonkit infer`, without an engine.

``llm_inputs`` builds the inputs NVIDIA's vllm backend reads; the CLI turns ``--sampling`` into
``sampling_parameters``, streams a vLLM stage token by token and counts tokens the stage's way.
The real engine runs the same requests in tests/integration/test_llm_pipelines.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tritonkit.cli import infer
from tritonkit.client import LLM_OUTPUTS, ResponseStream, StreamResponse, StreamStats, llm_inputs
from tritonkit.client._client import TritonClient
from tritonkit.client._inputs import ModelInfo, TensorInfo, prepare
from tritonkit.errors import InferenceError, InputMismatchError

#: the inputs and outputs of a vLLM stage as NVIDIA's backend declares them
VLLM_INPUTS = (
    TensorInfo("text_input", "BYTES", (1,)),
    TensorInfo("stream", "BOOL", (1,), optional=True),
    TensorInfo("sampling_parameters", "BYTES", (1,), optional=True),
    TensorInfo("exclude_input_in_output", "BOOL", (1,), optional=True),
    *(TensorInfo(f"return_{name}", "BOOL", (1,), optional=True) for name in LLM_OUTPUTS),
)
VLLM_OUTPUTS = (
    TensorInfo("text_output", "BYTES", (-1,)),
    TensorInfo("finish_reason", "BYTES", (-1,)),
    TensorInfo("num_output_tokens", "UINT32", (-1,)),
)


def _stage(backend: str = "vllm", inputs: tuple[TensorInfo, ...] = VLLM_INPUTS) -> ModelInfo:
    return ModelInfo("tiny_llm", "", 0, inputs, VLLM_OUTPUTS, decoupled=True, backend=backend)


def test_llm_inputs_send_the_prompt_stream_flag_and_sampling_as_json_when_given() -> None:
    inputs = llm_inputs("Hello", sampling={"max_tokens": 8, "temperature": 0}, stream=True)
    assert inputs["text_input"].tolist() == [b"Hello"]
    assert inputs["stream"].dtype == np.bool_ and inputs["stream"].tolist() == [True]
    assert json.loads(inputs["sampling_parameters"][0]) == {"max_tokens": 8, "temperature": 0}
    assert set(inputs) == {"text_input", "stream", "sampling_parameters"}


def test_llm_inputs_turn_on_each_additional_output_through_its_return_input() -> None:
    inputs = llm_inputs("Hi", stream=False, outputs=["num_output_tokens", "finish_reason"],
                        exclude_input_in_output=True)
    assert inputs["stream"].tolist() == [False]
    assert inputs["return_num_output_tokens"].tolist() == [True]
    assert inputs["return_finish_reason"].tolist() == [True]
    assert inputs["exclude_input_in_output"].tolist() == [True]
    assert "sampling_parameters" not in inputs


def test_llm_inputs_fit_the_stage_signature_when_prepared_by_the_client() -> None:
    given = llm_inputs("Hi", sampling={"max_tokens": 4}, outputs=LLM_OUTPUTS, exclude_input_in_output=False)
    prepared, _ = prepare(_stage(), given)
    by_name = {p.name: p for p in prepared}
    assert by_name["text_input"].datatype == "BYTES" and by_name["stream"].datatype == "BOOL"
    assert len(by_name) == len(VLLM_INPUTS)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"outputs": ["tokens"]}, "no additional output 'tokens'"),
        ({"sampling": {"temperature": float("nan")}}, "temperature is nan"),
        ({"sampling": {"stop": [float("inf")]}}, r"stop\[0\] is inf"),
        ({"sampling": {1: 2}}, "names must be strings"),
        ({"sampling": {"seed": object()}}, "cannot be written as JSON"),
        ({"sampling": [("max_tokens", 3)]}, "must be a mapping"),
    ],
)
def test_llm_inputs_refuse_what_the_stage_could_not_read_when_building_the_request(
    kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(InputMismatchError, match=message):
        llm_inputs("Hi", **kwargs)


def test_llm_inputs_refuse_a_prompt_that_is_not_text() -> None:
    with pytest.raises(InputMismatchError, match="prompt must be text"):
        llm_inputs(b"bytes")  # type: ignore[arg-type]


def test_unary_infer_on_a_vllm_stage_says_to_stream_and_how_to_get_one_response() -> None:
    error = TritonClient._decoupled_error("tiny_llm", _stage())
    assert isinstance(error, InferenceError)
    assert "always decoupled" in error.message
    assert "llm_inputs" in (error.hint or "") and "stream=False" in (error.hint or "")
    other = TritonClient._decoupled_error("gen", _stage(backend="python"))
    assert "vLLM" not in other.message and "client.stream" in (other.hint or "")


def test_signature_reads_the_backend_from_the_model_config() -> None:
    metadata = {"name": "tiny_llm", "inputs": [], "outputs": []}
    info = ModelInfo.from_metadata(metadata, {"config": {"backend": "vllm", "max_batch_size": 0}})
    assert info.backend == "vllm"
    assert ModelInfo.from_metadata(metadata, {"platform": "ensemble"}).backend == ""


# -- tritonkit infer ------------------------------------------------------------------------------


def test_parse_sampling_reads_a_json_object_or_a_json_file(tmp_path: Path) -> None:
    assert json.loads(infer.parse_sampling('{"max_tokens": 32, "temperature": 0}')) == {
        "max_tokens": 32, "temperature": 0,
    }
    path = tmp_path / "greedy.json"
    path.write_text('{"temperature": 0, "max_tokens": "16"}', encoding="utf-8")
    assert json.loads(infer.parse_sampling(str(path))) == {"temperature": 0, "max_tokens": "16"}


@pytest.mark.parametrize(("value", "message"), [("max_tokens=3", "not JSON"), ("[1, 2]", "JSON object")])
def test_parse_sampling_refuses_what_is_not_a_json_object(value: str, message: str) -> None:
    with pytest.raises(InputMismatchError, match=message):
        infer.parse_sampling(value)


def test_llm_request_streams_and_counts_tokens_on_a_vllm_stage_unless_the_user_said_otherwise() -> None:
    given: dict[str, Any] = {"text_input": ["Hi"], "stream": [False]}
    assert infer.llm_request(_stage(), given, '{"max_tokens": 4}', streaming=True) is True
    assert given["stream"] == [False]  # the user's choice stands
    assert given["return_num_output_tokens"].tolist() == [True]
    assert given["sampling_parameters"] == ['{"max_tokens": 4}']


def test_llm_request_leaves_other_models_alone_and_refuses_sampling_they_cannot_take() -> None:
    plain = ModelInfo("gen", "", 0, (TensorInfo("N", "INT32", (1,)),), (), decoupled=True, backend="python")
    given: dict[str, Any] = {"N": [3]}
    assert infer.llm_request(plain, given, None, streaming=True) is False and given == {"N": [3]}
    with pytest.raises(InputMismatchError, match="no input 'sampling_parameters'"):
        infer.llm_request(plain, given, "{}", streaming=True)
    with pytest.raises(InputMismatchError, match="given twice"):
        infer.llm_request(_stage(), {"sampling_parameters": ["{}"]}, "{}", streaming=True)


def _responses(items: list[dict[str, Any]], gap: float = 0.01) -> ResponseStream:
    stats = StreamStats(started=0.0)

    def run() -> Iterator[StreamResponse]:
        for i, outputs in enumerate(items):
            stats.record(now=0.1 + i * gap)
            yield StreamResponse({k: np.asarray(v) for k, v in outputs.items()}, index=i)

    return ResponseStream(run(), stats)  # type: ignore[arg-type]


def _token(text: str, n: int = 1) -> dict[str, Any]:
    text_output = np.array([text.encode()], dtype=object)
    return {"text_output": text_output, "num_output_tokens": np.array([n], np.uint32)}


def test_llm_stream_prints_tokens_inline_then_ttft_token_count_and_tokens_per_second(
    capsys: pytest.CaptureFixture[str],
) -> None:
    items = [_token("Hel"), _token("lo", 2), _token(" world"), _token("!")]
    items[-1]["finish_reason"] = np.array([b"length"], dtype=object)
    infer._render_llm_stream(_responses(items), as_json=False)
    out, err = capsys.readouterr()
    assert out == "Hello world!\nfinish_reason=length\n"  # additional outputs after the text
    assert "5 token(s), first token after 100 ms" in err
    assert "133.3 tokens/s after the first" in err  # 4 tokens after the first in 30 ms


def test_llm_stream_counts_responses_with_text_when_the_stage_sends_no_token_count(
    capsys: pytest.CaptureFixture[str],
) -> None:
    items = [{"text_output": np.array([w.encode()], dtype=object)} for w in ("a", " b", " c")]
    items.append({})  # a flags-only final response
    infer._render_llm_stream(_responses(items), as_json=True)
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    summary = lines[-1]["summary"]
    assert summary["responses"] == 4 and summary["tokens"] is None and summary["tokens_per_s"] is None
    assert summary["time_to_first_token_s"] == pytest.approx(0.1)
