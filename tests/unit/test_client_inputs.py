"""Input checks against model metadata, batch handling, split and merge."""

from __future__ import annotations

import numpy as np
import pytest

from tritonkit.client._inputs import ModelInfo, merge, prepare, split
from tritonkit.errors import InputMismatchError

# Metadata and config as Triton's HTTP API returns them (gRPC's as_json has string shapes).
ADD_META = {
    "name": "add",
    "inputs": [
        {"name": "INPUT0", "datatype": "FP32", "shape": [-1, 4]},
        {"name": "INPUT1", "datatype": "FP32", "shape": [-1, 4]},
    ],
    "outputs": [{"name": "SUM", "datatype": "FP32", "shape": [-1, 4]}],
}
ADD = ModelInfo.from_metadata(ADD_META, {"max_batch_size": 4}, version="")
ECHO = ModelInfo.from_metadata(
    {"name": "echo", "inputs": [{"name": "TEXT", "datatype": "BYTES", "shape": ["-1"]}], "outputs": []},
    {"config": {"input": [{"name": "TEXT"}]}},  # gRPC nests config and omits max_batch_size 0
    version="",
)


def test_model_info_strips_batch_dim_when_model_batches() -> None:
    assert ADD.batching and ADD.inputs[0].dims == (4,)
    assert not ECHO.batching and ECHO.inputs[0].dims == (-1,)


def test_prepare_adds_batch_dim_of_one_when_caller_gives_one_sample() -> None:
    prepared, batch = prepare(ADD, {"INPUT0": np.zeros(4, np.float32), "INPUT1": [1, 2, 3, 4]})
    assert batch == 1
    assert [p.array.shape for p in prepared] == [(1, 4), (1, 4)]
    assert prepared[1].array.dtype == np.float32  # Python literals take the model's type


def test_prepare_keeps_batch_when_caller_gives_a_batch() -> None:
    prepared, batch = prepare(
        ADD, {"INPUT0": np.zeros((3, 4), np.float32), "INPUT1": np.ones((3, 4), np.float32)}
    )
    assert batch == 3 and prepared[0].array.shape == (3, 4)


@pytest.mark.parametrize(
    ("inputs", "words"),
    [
        (
            {"INPUT0": np.zeros(3, np.float32), "INPUT1": np.zeros(4, np.float32)},
            "input 'INPUT0' of model 'add' expects shape [N, 4]",
        ),
        (
            {"INPUT0": np.zeros(4, np.float64), "INPUT1": np.zeros(4, np.float32)},
            "expects FP32 (numpy float32), got numpy float64",
        ),
        ({"INPUT0": np.zeros(4, np.float32)}, "needs input(s) INPUT1 FP32 [N, 4]"),
        (
            {"INPUT0": np.zeros(4, np.float32), "INPUT1": np.zeros(4, np.float32), "EXTRA": 1},
            "no input named 'EXTRA'",
        ),
        (
            {"INPUT0": np.zeros((2, 4), np.float32), "INPUT1": np.zeros((3, 4), np.float32)},
            "batch size 3, but other inputs have 2",
        ),
        ({"INPUT0": [["a", "b", "c", "d"]], "INPUT1": np.zeros(4, np.float32)}, "cannot convert"),
    ],
)
def test_prepare_raises_input_mismatch_naming_input_when_inputs_do_not_match(
    inputs: dict[str, object], words: str
) -> None:
    with pytest.raises(InputMismatchError) as info:
        prepare(ADD, inputs)
    assert words in str(info.value)


def test_prepare_accepts_safe_casts_when_dtype_widens() -> None:
    prepared, _ = prepare(ADD, {"INPUT0": np.zeros(4, np.int8), "INPUT1": np.zeros(4, np.float16)})
    assert all(p.array.dtype == np.float32 for p in prepared)


def test_prepare_encodes_strings_as_bytes_objects_when_input_is_bytes() -> None:
    (p,), batch = prepare(ECHO, {"TEXT": ["héllo", b"raw"]})
    assert batch is None
    assert p.array.dtype == object and p.array.tolist() == ["héllo".encode(), b"raw"]
    (single,), _ = prepare(ECHO, {"TEXT": "one"})
    assert single.array.tolist() == [b"one"]
    with pytest.raises(InputMismatchError, match="expects BYTES"):
        prepare(ECHO, {"TEXT": np.zeros(2, np.float32)})


def test_prepare_rejects_wrong_rank_when_model_does_not_batch() -> None:
    with pytest.raises(InputMismatchError, match="does not batch"):
        prepare(ECHO, {"TEXT": [["a"], ["b"]]})


def test_split_and_merge_round_trip_when_batch_exceeds_max_batch_size() -> None:
    a = np.arange(40, dtype=np.float32).reshape(10, 4)
    prepared, batch = prepare(ADD, {"INPUT0": a, "INPUT1": a})
    chunks = split(prepared, batch, ADD.max_batch_size)
    assert [c[0].array.shape[0] for c in chunks] == [4, 4, 2]
    merged = merge([{"SUM": c[0].array + c[1].array} for c in chunks])
    np.testing.assert_array_equal(merged["SUM"], a + a)
    assert split(prepared[:1], 3, 4) == [prepared[:1]]


RAW = ModelInfo.from_metadata(
    {
        "name": "arr_coc",
        "inputs": [
            {"name": "RAW_IMAGE", "datatype": "UINT8", "shape": [-1]},
            {"name": "FLAGS", "datatype": "BOOL", "shape": [-1]},
            {"name": "SCALE", "datatype": "FP16", "shape": [-1]},
        ],
        "outputs": [],
    },
    {"max_batch_size": 0},
    version="",
)


@pytest.mark.parametrize(
    ("name", "value", "words"),
    [
        ("RAW_IMAGE", [1.5], "got floating-point values (e.g. 1.5), which would be truncated"),
        ("RAW_IMAGE", [2.0, 3.0], "floating-point"),
        ("RAW_IMAGE", [1, 300], "range is 0..255; got 300, which would wrap around"),
        ("RAW_IMAGE", [-1], "got -1"),
        ("RAW_IMAGE", ["12"], "cannot convert the given list of str"),
        ("RAW_IMAGE", "abc", "without guessing"),
        ("RAW_IMAGE", [1 + 2j], "complex"),
        ("FLAGS", [0, 2], "other than true/false or 0/1"),
        ("SCALE", [1e6], "beyond its largest value"),
    ],
)
def test_prepare_refuses_lossy_conversions_naming_the_input_when_given_python_literals(
    name: str, value: object, words: str
) -> None:
    given = {"RAW_IMAGE": [1], "FLAGS": [True], "SCALE": [1.0], name: value}
    with pytest.raises(InputMismatchError) as info:
        prepare(RAW, given)
    assert f"input '{name}' of model 'arr_coc'" in str(info.value)
    assert words in str(info.value)


def test_prepare_converts_python_literals_exactly_when_no_value_is_lost() -> None:
    prepared, _ = prepare(RAW, {"RAW_IMAGE": [0, 255, True], "FLAGS": [0, 1, True], "SCALE": [1, 0.5, -2e4]})
    arrays = {p.name: p.array for p in prepared}
    assert arrays["RAW_IMAGE"].dtype == np.uint8 and arrays["RAW_IMAGE"].tolist() == [0, 255, 1]
    assert arrays["FLAGS"].dtype == np.bool_ and arrays["FLAGS"].tolist() == [False, True, True]
    assert arrays["SCALE"].dtype == np.float16 and arrays["SCALE"].tolist() == [1.0, 0.5, -20000.0]
    (empty, *_), _ = prepare(RAW, {"RAW_IMAGE": [], "FLAGS": [], "SCALE": []})
    assert empty.array.dtype == np.uint8 and empty.array.shape == (0,)


def test_prepare_refuses_numpy_arrays_that_do_not_cast_safely_when_dtypes_differ() -> None:
    with pytest.raises(InputMismatchError, match="input 'RAW_IMAGE' of model 'arr_coc' expects UINT8"):
        prepare(RAW, {"RAW_IMAGE": np.array([1.5]), "FLAGS": [True], "SCALE": [1.0]})
