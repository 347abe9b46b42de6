"""`tritonkit infer --input NAME=VALUE`: how a VALUE becomes an input, and how auth options combine."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tritonkit.cli._auth_options import build_auth
from tritonkit.cli.infer import parse_value
from tritonkit.client import CombinedAuth, KeyAuth
from tritonkit.client._inputs import TensorInfo
from tritonkit.errors import ClientError, InputMismatchError

FP32 = TensorInfo("x", "FP32", (4,))
RAW = TensorInfo("img", "UINT8", (-1,))
PIXELS = TensorInfo("px", "UINT8", (-1, -1, 3))
TEXT = TensorInfo("q", "BYTES", (1,))


def test_parse_value_reads_json_literal_when_value_is_json() -> None:
    assert parse_value("[[1,2,3,4]]", FP32) == [[1, 2, 3, 4]]
    assert parse_value('"hi"', TEXT) == ["hi"]


def test_parse_value_reads_npy_and_json_files_when_value_is_a_path(tmp_path: Path) -> None:
    np.save(tmp_path / "a.npy", np.ones((2, 4), np.float32))
    (tmp_path / "b.json").write_text(json.dumps([1, 2, 3, 4]))
    assert parse_value(str(tmp_path / "a.npy"), FP32).shape == (2, 4)
    assert parse_value(str(tmp_path / "b.json"), FP32) == [1, 2, 3, 4]


def test_parse_value_sends_raw_bytes_or_pixels_when_value_is_an_image(tmp_path: Path) -> None:
    png = tmp_path / "i.png"
    Image.new("RGB", (3, 2), (10, 20, 30)).save(png)
    raw = parse_value(str(png), RAW)
    assert raw.dtype == np.uint8 and raw.tobytes() == png.read_bytes()
    pixels = parse_value(str(png), PIXELS)
    assert pixels.shape == (2, 3, 3) and pixels[0, 0].tolist() == [10, 20, 30]
    assert parse_value(str(png), TEXT) == [png.read_bytes()]


def test_parse_value_treats_plain_text_as_bytes_when_input_is_bytes() -> None:
    assert parse_value("what is this?", TEXT) == ["what is this?"]


def test_parse_value_raises_when_numeric_input_gets_text() -> None:
    with pytest.raises(InputMismatchError, match="neither JSON nor a file"):
        parse_value("one two", FP32)


def test_build_auth_combines_providers_when_several_options_are_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("K", "key-1234")
    monkeypatch.setenv("A", "admin-5678")
    auth = build_auth(
        key_env="K",
        aml_endpoint=None,
        subscription=None,
        resource_group=None,
        workspace=None,
        entra=False,
        restricted=["admin-key=A"],
    )
    assert isinstance(auth, CombinedAuth)
    assert dict(auth.headers()) == {"Authorization": "Bearer key-1234", "admin-key": "admin-5678"}
    single = build_auth(
        key_env="K",
        aml_endpoint=None,
        subscription=None,
        resource_group=None,
        workspace=None,
        entra=False,
        restricted=[],
    )
    assert isinstance(single, KeyAuth)
    with pytest.raises(ClientError, match="NAME=VALUE"):
        build_auth(
            key_env=None,
            aml_endpoint=None,
            subscription=None,
            resource_group=None,
            workspace=None,
            entra=False,
            restricted=["no-equals"],
        )
