"""The example pipelines on a real local tritonserver (the shared ``example_server``).

Every model of ensembles/*.yaml loads; each one, ensembles included, answers plain
``tritonclient`` over HTTP and gRPC with what the same stages compute when run directly in
Python (ensembles/reference.py: the shipped model.py files and onnxruntime on the generated
ONNX models); and ``tritonkit validate`` accepts the built repository.
"""

from __future__ import annotations

import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests._examples import load_example

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
VLM_QUERY = "Describe the image."
ARR_COC_QUERY = "Where is the sun?"


reference = load_example("ensembles/reference.py")


def _text(value: str) -> np.ndarray:
    return np.array([value.encode("utf-8")], dtype=np.object_)


@cache
def _cases() -> dict[str, tuple[dict[str, np.ndarray], dict[str, np.ndarray]]]:
    """model -> (inputs, expected outputs), every stage computed in-process on fixed inputs."""
    stage = reference.load_stage
    raw = reference.sample_bytes()
    pixels = stage("vlm/image_preprocessor.py").preprocess(raw)
    colours, detail = reference.run_onnx("make_vision_encoder", {"PIXELS": pixels})
    texture = stage("arr_coc/texture_array.py").texture_array(raw)
    embedding = stage("arr_coc/query_encoder.py").encode_query(ARR_COC_QUERY)[None]
    arr = reference.arr_coc(raw, ARR_COC_QUERY)
    maps = {name: arr[name] for name in ("PROPOSITIONAL", "PERSPECTIVAL", "PARTICIPATORY")}
    vlm_text = _text(reference.vlm(raw, VLM_QUERY))
    arr_text = _text(arr["GENERATED_TEXT"])
    question, vlm_question = _text(ARR_COC_QUERY), _text(VLM_QUERY)
    relevance, tokens, balance = arr["RELEVANCE_MAP"], arr["TOKEN_BUDGET"], arr["BALANCE"]
    return {
        "densenet_onnx": ({"data_0": pixels[None]}, {"fc6_1": reference.densenet(pixels[None])}),
        "image_preprocessor": ({"RAW_IMAGE": raw}, {"PIXELS": pixels}),
        "vision_encoder": ({"PIXELS": pixels}, {"REGION_COLOURS": colours, "REGION_DETAIL": detail}),
        "vlm_model": (
            {"REGION_COLOURS": colours, "REGION_DETAIL": detail, "TEXT_QUERY": vlm_question},
            {"GENERATED_TEXT": vlm_text},
        ),
        "vlm_ensemble": ({"RAW_IMAGE": raw, "TEXT_QUERY": vlm_question}, {"GENERATED_TEXT": vlm_text}),
        "arr_coc_request_check": (
            {"RAW_IMAGE": raw, "TEXT_QUERY": question},
            {"CHECKED_IMAGE": raw, "CHECKED_QUERY": question},
        ),
        "texture_array": ({"RAW_IMAGE": raw}, {"TEXTURE": texture}),
        "query_encoder": ({"TEXT_QUERY": question}, {"QUERY_EMBEDDING": embedding}),
        "propositional_scorer": ({"TEXTURE": texture}, {"PROPOSITIONAL": maps["PROPOSITIONAL"]}),
        "perspectival_scorer": ({"TEXTURE": texture}, {"PERSPECTIVAL": maps["PERSPECTIVAL"]}),
        "participatory_scorer": (
            {"TEXTURE": texture, "QUERY_EMBEDDING": embedding},
            {"PARTICIPATORY": maps["PARTICIPATORY"]},
        ),
        "opponent_processor": (
            maps,
            {"RELEVANCE": relevance, "TOKEN_BUDGET": tokens, "BALANCE": balance},
        ),
        "arr_coc_decoder": (
            {
                "TEXT_QUERY": question,
                "RELEVANCE": relevance,
                "TOKEN_BUDGET": tokens,
                "BALANCE": balance,
                "TEXTURE": texture,
            },
            {"GENERATED_TEXT": arr_text},
        ),
        "arr_coc": (
            {"RAW_IMAGE": raw, "TEXT_QUERY": question},
            {"GENERATED_TEXT": arr_text, "RELEVANCE_MAP": relevance, "TOKEN_BUDGET": tokens},
        ),
    }


def _client(server: Any, protocol: str) -> tuple[Any, Any]:
    """A plain tritonclient client for ``protocol`` and its module."""
    if protocol == "http":
        import tritonclient.http as module

        return module.InferenceServerClient(server.http_address), module
    import tritonclient.grpc as module

    return module.InferenceServerClient(server.grpc_address), module


def _infer(client: Any, module: Any, model: str, inputs: dict[str, np.ndarray], outputs: list[str]) -> Any:
    from tritonclient.utils import np_to_triton_dtype

    tensors = []
    for name, value in inputs.items():
        tensor = module.InferInput(name, list(value.shape), np_to_triton_dtype(value.dtype))
        tensor.set_data_from_numpy(value)
        tensors.append(tensor)
    wanted = [module.InferRequestedOutput(name) for name in outputs]
    return client.infer(model, tensors, outputs=wanted)


def _assert_same(model: str, name: str, got: np.ndarray, expected: np.ndarray) -> None:
    where = f"{model}.{name}"
    assert got.shape == expected.shape, where
    if expected.dtype == np.object_:
        assert [v.decode() for v in got.ravel()] == [v.decode() for v in expected.ravel()], where
    elif np.issubdtype(expected.dtype, np.integer):
        assert got.dtype == expected.dtype and np.array_equal(got, expected), where
    else:
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5, err_msg=where)


def test_example_models_are_all_ready_when_the_server_starts(example_server: Any) -> None:
    client, _ = _client(example_server, "http")
    index = {m["name"]: m.get("state") for m in client.get_model_repository_index()}
    # the streaming variants (decoupled: no unary call) are tested in test_streaming.py
    streaming = ("vlm_model_stream", "vlm_stream", "arr_coc_decoder_stream", "arr_coc_stream")
    assert index == {model: "READY" for model in (*_cases(), *streaming)}


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_every_example_model_answers_like_its_python_stages_when_called_with_tritonclient(
    example_server: Any, protocol: str
) -> None:
    client, module = _client(example_server, protocol)
    for model, (inputs, expected) in _cases().items():
        result = _infer(client, module, model, inputs, list(expected))
        for name, value in expected.items():
            _assert_same(model, name, result.as_numpy(name), value)


def test_vlm_and_arr_coc_answer_the_demo_questions_when_given_the_sample_image(example_server: Any) -> None:
    client, module = _client(example_server, "grpc")
    raw = reference.sample_bytes()
    vlm = _infer(
        client,
        module,
        "vlm_ensemble",
        {"RAW_IMAGE": raw, "TEXT_QUERY": _text("Any yellow?")},
        ["GENERATED_TEXT"],
    )
    assert vlm.as_numpy("GENERATED_TEXT")[0].decode() == (
        "Yes, yellow covers about 3% of the image, mostly at the top right."
    )
    arr = _infer(
        client,
        module,
        "arr_coc",
        {"RAW_IMAGE": raw, "TEXT_QUERY": _text("Find the red house")},
        ["GENERATED_TEXT", "TOKEN_BUDGET"],
    )
    assert "the focus is at the left: a mid-toned red area" in arr.as_numpy("GENERATED_TEXT")[0].decode()
    assert int(arr.as_numpy("TOKEN_BUDGET").sum()) == 1024


def test_densenet_returns_labelled_top_classes_when_asked_for_classification(example_server: Any) -> None:
    import tritonclient.http as httpclient

    (inputs, expected) = _cases()["densenet_onnx"]
    client = httpclient.InferenceServerClient(example_server.http_address)
    tensor = httpclient.InferInput("data_0", [1, 3, 224, 224], "FP32")
    tensor.set_data_from_numpy(inputs["data_0"])
    top = httpclient.InferRequestedOutput("fc6_1", class_count=3)
    result = client.infer("densenet_onnx", [tensor], outputs=[top]).as_numpy("fc6_1")
    labels = (ROOT / "ensembles" / "densenet" / "labels.txt").read_text().splitlines()
    best = [int(i) for i in np.argsort(-expected["fc6_1"][0])[:3]]
    assert [entry.decode().split(":", 2)[1:] for entry in result[0]] == [[str(i), labels[i]] for i in best]


def test_ensemble_reports_the_stage_error_when_raw_image_is_not_an_image(example_server: Any) -> None:
    from tritonclient.utils import InferenceServerException

    client, module = _client(example_server, "http")
    garbage = np.frombuffer(b"this is not an image", dtype=np.uint8)
    with pytest.raises(InferenceServerException, match="RAW_IMAGE is not a readable image"):
        _infer(
            client,
            module,
            "vlm_ensemble",
            {"RAW_IMAGE": garbage, "TEXT_QUERY": _text("hi")},
            ["GENERATED_TEXT"],
        )


BAD_INPUTS = {
    "not an image": (np.frombuffer(b"this is not an image", dtype=np.uint8), "Where?"),
    "empty image": (np.zeros(0, dtype=np.uint8), "Where?"),
    "truncated PNG": (reference.sample_bytes()[:200], "Where?"),
    "non-UTF-8 query": (reference.sample_bytes(), b"\xff\xfe red?"),
    "oversized query": (reference.sample_bytes(), "red " * 1000),
}


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("model", ["vlm_ensemble", "arr_coc"])
def test_pipelines_answer_invalid_argument_with_the_stage_message_when_client_input_is_bad(
    example_server: Any, protocol: str, model: str
) -> None:
    from tritonclient.utils import InferenceServerException

    client, module = _client(example_server, protocol)
    expected_status = "400" if protocol == "http" else "StatusCode.INVALID_ARGUMENT"
    for what, (image, query) in BAD_INPUTS.items():
        text = np.array([query if isinstance(query, bytes) else query.encode()], dtype=np.object_)
        with pytest.raises(InferenceServerException) as caught:
            _infer(client, module, model, {"RAW_IMAGE": image, "TEXT_QUERY": text}, ["GENERATED_TEXT"])
        message = str(caught.value)
        assert caught.value.status() == expected_status, (what, caught.value.status(), message)
        assert "RAW_IMAGE" in message or "TEXT_QUERY" in message, (what, message)
    assert example_server.running


def test_tritonkit_validate_accepts_the_example_repository_when_built_from_the_specs(
    example_repository: Path,
) -> None:
    for config_name in ([], ["--model-config-name", "cpu"]):
        result = subprocess.run(
            [sys.executable, "-m", "tritonkit", "validate", str(example_repository), "--json", *config_name],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert '"valid": true' in result.stdout


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_tritonkit_client_raises_4xx_inference_error_with_the_stage_message_when_the_image_is_bad(
    example_server: Any, protocol: str
) -> None:
    from tritonkit.client import TritonClient
    from tritonkit.errors import InferenceError, InputMismatchError

    url = example_server.http_url if protocol == "http" else example_server.grpc_url
    with TritonClient(url, protocol=protocol) as client:
        with pytest.raises(InferenceError) as caught:
            client.infer("arr_coc", RAW_IMAGE=np.arange(16, dtype=np.uint8), TEXT_QUERY=["Where?"])
        assert caught.value.status in (400, "INVALID_ARGUMENT"), caught.value.status
        assert "RAW_IMAGE is not a readable image (16 bytes)" in str(caught.value)
        # refused before anything is sent: a float list would have been truncated into one byte
        with pytest.raises(InputMismatchError, match="input 'RAW_IMAGE' of model 'arr_coc'"):
            client.infer("arr_coc", RAW_IMAGE=[1.5], TEXT_QUERY=["Where?"])
