"""Request data: generated from model metadata, or read from real data files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tritonkit.errors import PerfError
from tritonkit.perf.inputs import (
    encode_image_png,
    generate_requests,
    load_requests,
    model_inputs_from_metadata,
    parse_shape_options,
)
from tritonkit.perf.runner import PerfSettings

# What Triton's HTTP metadata/config endpoints answer for a batching image model ...
DENSENET_META = {
    "name": "densenet_onnx",
    "inputs": [{"name": "data_0", "datatype": "FP32", "shape": [-1, 3, 224, 224]}],
    "outputs": [{"name": "fc6_1", "datatype": "FP32", "shape": [-1, 1000]}],
}
# ... and what gRPC's as_json form gives (int64 as strings, no batching, variable dims)
VLM_META = {
    "name": "vlm",
    "inputs": [
        {"name": "RAW_IMAGE", "datatype": "UINT8", "shape": ["-1"]},
        {"name": "TEXT_QUERY", "datatype": "BYTES", "shape": ["1"]},
    ],
    "outputs": [{"name": "GENERATED_TEXT", "datatype": "BYTES", "shape": ["1"]}],
}


def test_model_inputs_drop_batch_dim_when_model_batches() -> None:
    m = model_inputs_from_metadata(DENSENET_META, {"max_batch_size": 8})
    assert m.max_batch_size == 8
    assert m.inputs[0].dims == (3, 224, 224)
    assert m.output_names == ("fc6_1",)


def test_generate_random_request_shaped_with_batch_one_when_model_batches() -> None:
    m = model_inputs_from_metadata(DENSENET_META, {"config": {"max_batch_size": 8}})
    (req,) = generate_requests(m)
    arr = req["data_0"]
    assert arr.shape == (1, 3, 224, 224) and arr.dtype == np.float32
    assert 0.0 <= arr.min() and arr.max() < 1.0 and arr.std() > 0
    (zero,) = generate_requests(m, mode="zero")
    assert not zero["data_0"].any()


def test_generate_raises_with_shape_hint_when_dims_are_variable() -> None:
    m = model_inputs_from_metadata(VLM_META, {"config": {"max_batch_size": 0}})
    with pytest.raises(PerfError, match="variable dims") as info:
        generate_requests(m)
    assert "--shape RAW_IMAGE:16" in str(info.value.hint)


def test_generate_uses_given_shape_when_dims_are_variable() -> None:
    m = model_inputs_from_metadata(VLM_META, {"max_batch_size": 0})
    (req,) = generate_requests(m, shapes=parse_shape_options(["RAW_IMAGE:1000"]))
    assert req["RAW_IMAGE"].shape == (1000,) and req["RAW_IMAGE"].dtype == np.uint8
    assert req["TEXT_QUERY"].shape == (1,) and isinstance(req["TEXT_QUERY"][0], bytes)


@pytest.mark.parametrize("opt", ["RAW_IMAGE", "RAW_IMAGE:", "RAW_IMAGE:a,b", "RAW_IMAGE:0", ":4"])
def test_parse_shape_raises_when_option_malformed(opt: str) -> None:
    with pytest.raises(PerfError, match="--shape"):
        parse_shape_options([opt])


def test_generate_raises_when_shape_names_unknown_input_or_misfits() -> None:
    m = model_inputs_from_metadata(VLM_META, {"max_batch_size": 0})
    with pytest.raises(PerfError, match="no input 'NOPE'"):
        generate_requests(m, shapes={"NOPE": (1,)})
    d = model_inputs_from_metadata(DENSENET_META, {"max_batch_size": 8})
    with pytest.raises(PerfError, match="does not fit"):
        generate_requests(d, shapes={"data_0": (3, 100, 100)})


def test_load_json_reads_perf_analyzer_format_when_given_a_json_file(tmp_path: Path) -> None:
    m = model_inputs_from_metadata(VLM_META, {"max_batch_size": 0})
    path = tmp_path / "data.json"
    path.write_text(
        json.dumps(
            {
                "data": [
                    {"RAW_IMAGE": [1, 2, 3], "TEXT_QUERY": ["what is it?"]},
                    {
                        "RAW_IMAGE": {"content": [4, 5, 6, 7], "shape": [4]},
                        "TEXT_QUERY": {"content": ["hi"], "shape": [1]},
                    },
                ]
            }
        )
    )
    reqs = load_requests(m, path)
    assert len(reqs) == 2
    assert reqs[0]["RAW_IMAGE"].tolist() == [1, 2, 3] and reqs[0]["RAW_IMAGE"].dtype == np.uint8
    assert reqs[1]["TEXT_QUERY"].tolist() == [b"hi"]


def test_load_json_raises_naming_entry_when_an_input_is_missing(tmp_path: Path) -> None:
    m = model_inputs_from_metadata(VLM_META, {"max_batch_size": 0})
    path = tmp_path / "data.json"
    path.write_text(json.dumps({"data": [{"RAW_IMAGE": [1]}]}))
    with pytest.raises(PerfError, match=r"data\[0\] has no value for input 'TEXT_QUERY'"):
        load_requests(m, path)


def test_load_text_makes_one_request_per_line_when_given_a_text_file(tmp_path: Path) -> None:
    m = model_inputs_from_metadata(VLM_META, {"max_batch_size": 0})
    path = tmp_path / "queries.txt"
    path.write_text("a cat\n\nthe sky\n")
    reqs = load_requests(m, path, shapes={"RAW_IMAGE": (8,)})
    assert [r["TEXT_QUERY"].tolist() for r in reqs] == [[b"a cat"], [b"the sky"]]
    assert reqs[0]["RAW_IMAGE"].shape == (8,)


def test_load_images_from_directory_when_model_takes_pixels_or_encoded_bytes(tmp_path: Path) -> None:
    img = np.zeros((40, 60, 3), dtype=np.uint8)
    img[:, :, 0] = 255
    (tmp_path / "a.png").write_bytes(encode_image_png(img))
    (tmp_path / "b.png").write_bytes(encode_image_png(img[::-1]))
    dense = model_inputs_from_metadata(DENSENET_META, {"max_batch_size": 8})
    reqs = load_requests(dense, tmp_path)
    assert len(reqs) == 2
    pixels = reqs[0]["data_0"]
    assert pixels.shape == (1, 3, 224, 224) and pixels.dtype == np.float32
    assert pixels[0, 0].mean() == pytest.approx(1.0) and pixels[0, 1].mean() == pytest.approx(0.0)
    vlm = model_inputs_from_metadata(VLM_META, {"max_batch_size": 0})
    raw = load_requests(vlm, tmp_path / "a.png")
    assert bytes(raw[0]["RAW_IMAGE"]) == (tmp_path / "a.png").read_bytes()


def test_load_raises_when_path_does_not_exist(tmp_path: Path) -> None:
    m = model_inputs_from_metadata(VLM_META, {"max_batch_size": 0})
    with pytest.raises(PerfError, match="no such file"):
        load_requests(m, tmp_path / "missing")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"protocol": "ftp"},
        {"max_trials": 2},
        {"measurement_interval_ms": 10},
        {"duration_s": 1, "requests_per_window": 5},
        {"stability_percentage": 0},
        {"workers": -1},
    ],
)
def test_settings_validate_raises_when_a_setting_is_out_of_range(kwargs: dict[str, object]) -> None:
    with pytest.raises(PerfError):
        PerfSettings(url="http://x", model="m", **kwargs).validate()  # type: ignore[arg-type]


# arr_coc_stream's inputs: MAX_TOKENS is optional (the config's `optional: true`)
STREAM_META = {
    "name": "arr_coc_stream",
    "inputs": [*VLM_META["inputs"], {"name": "MAX_TOKENS", "datatype": "INT32", "shape": ["1"]}],
    "outputs": VLM_META["outputs"],
}
STREAM_CONFIG = {"config": {"max_batch_size": 0, "input": [{"name": "MAX_TOKENS", "optional": True}]}}


def test_real_data_may_leave_out_an_optional_input_which_is_then_not_sent(tmp_path: Path) -> None:
    m = model_inputs_from_metadata(STREAM_META, STREAM_CONFIG)
    data = tmp_path / "req.json"
    data.write_text(json.dumps({"data": [{"RAW_IMAGE": [1, 2, 3], "TEXT_QUERY": ["hi"]}]}))
    (req,) = load_requests(m, data)
    assert set(req) == {"RAW_IMAGE", "TEXT_QUERY"}
    folder = tmp_path / "request"
    folder.mkdir()
    (folder / "RAW_IMAGE").write_bytes(b"\x01\x02")
    (folder / "TEXT_QUERY").write_text("what is in the picture?")
    (req,) = load_requests(m, folder)
    assert set(req) == {"RAW_IMAGE", "TEXT_QUERY"} and req["TEXT_QUERY"][0] == b"what is in the picture?"
    data.write_text(json.dumps({"data": [{"RAW_IMAGE": [1, 2, 3]}]}))
    with pytest.raises(PerfError, match="TEXT_QUERY"):  # a required one still may not be left out
        load_requests(m, data)
