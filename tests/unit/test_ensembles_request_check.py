"""The client-input checks of the example pipelines, run directly in Python (no Triton).

``arr_coc_request_check`` (ARR-COC's first step) and the image decoders of ``texture_array`` and
``image_preprocessor``: every way a hostile upload can be wrong is a StageError (INVALID_ARGUMENT
in Triton) with a message naming the input, and the pixel limit holds before any pixel is decoded.
"""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from tests._examples import load_example

reference = load_example("ensembles/reference.py")
check = reference.load_stage("arr_coc/request_check.py")
texture_mod = reference.load_stage("arr_coc/texture_array.py")
pre = reference.load_stage("vlm/image_preprocessor.py")
LIMITS = check.Limits()


def _u8(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=np.uint8)


def _png_header(width: int, height: int) -> bytes:
    """A PNG whose header claims width x height (its pixel data is one short row)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    body = chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 8)) + chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + body


def _jpeg() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (64, 48), (200, 40, 40)).save(out, format="JPEG")
    return out.getvalue()


SAMPLE = reference.sample_bytes()

BAD_IMAGES = {
    "random bytes": (_u8(bytes(range(16))), "not a format Pillow reads"),
    "zero bytes": (np.zeros(0, np.uint8), "RAW_IMAGE is empty"),
    "truncated PNG": (SAMPLE[: SAMPLE.size // 2], "not a readable image"),
    "truncated JPEG": (_u8(_jpeg()[:300]), "not a readable image"),
    "pixel limit": (_u8(_png_header(8000, 6000)), "8000x6000 pixels; the limit is 40000000"),
    "Pillow's bomb limit": (_u8(_png_header(60_000, 60_000)), "more pixels than the limit"),
}


@pytest.mark.parametrize("case", sorted(BAD_IMAGES))
def test_check_image_raises_stage_error_naming_raw_image_when_the_upload_is_bad(case: str) -> None:
    raw, words = BAD_IMAGES[case]
    with pytest.raises(check.StageError, match="RAW_IMAGE") as info:
        check.check_image(raw, LIMITS)
    assert words in str(info.value)
    assert "_io.BytesIO" not in str(info.value)


@pytest.mark.parametrize("case", sorted(BAD_IMAGES))
def test_stage_decoders_refuse_the_same_uploads_when_called_without_the_check(case: str) -> None:
    raw, _ = BAD_IMAGES[case]
    with pytest.raises(texture_mod.StageError, match="RAW_IMAGE"):
        texture_mod.texture_array(raw)
    with pytest.raises(pre.StageError, match="RAW_IMAGE"):
        pre.preprocess(raw)


def test_check_image_refuses_oversized_uploads_by_byte_count_before_opening_them() -> None:
    with pytest.raises(check.StageError, match="RAW_IMAGE is 2000 bytes; the limit is 1000"):
        check.check_image(np.zeros(2000, np.uint8), check.Limits(max_image_bytes=1000))


def test_check_image_accepts_the_sample_image_when_within_the_limits() -> None:
    check.check_image(SAMPLE, LIMITS)
    check.check_image(_u8(_jpeg()), check.Limits(max_pixels=64 * 48))


def test_preprocess_pixel_limit_comes_from_the_caller_when_given() -> None:
    with pytest.raises(pre.StageError, match="the limit is 100"):
        pre.preprocess(_u8(_jpeg()), max_pixels=100)


@pytest.mark.parametrize(
    ("query", "words"),
    [
        (np.array([b"\xff\xfe where?"], dtype=np.object_), "not UTF-8 text (byte 0 is invalid)"),
        (np.array([b"   "], dtype=np.object_), "TEXT_QUERY is empty"),
        (np.array([b"red " * 600], dtype=np.object_), "TEXT_QUERY has 2400 characters; the limit is 2000"),
        (np.array([b"a", b"b"], dtype=np.object_), "exactly one string, got 2"),
        (np.array([], dtype=np.object_), "exactly one string, got 0"),
    ],
)
def test_check_query_raises_stage_error_when_the_query_is_bad(query: np.ndarray, words: str) -> None:
    with pytest.raises(check.StageError) as info:
        check.check_query(query, LIMITS)
    assert words in str(info.value)


def test_check_query_accepts_one_utf8_question_when_within_the_limit() -> None:
    check.check_query(np.array(["Où est le soleil ?".encode()], dtype=np.object_), LIMITS)


def test_limits_come_from_config_parameters_and_refuse_bad_values() -> None:
    params = {"MAX_PIXELS": {"string_value": "1000"}, "MAX_QUERY_CHARS": {"string_value": "10"}}
    limits = check.Limits.from_config({"parameters": params})
    assert (limits.max_pixels, limits.max_query_chars) == (1000, 10)
    assert limits.max_image_bytes == LIMITS.max_image_bytes
    with pytest.raises(check.StageError, match="MAX_PIXELS must be an int"):
        check.Limits.from_config({"parameters": {"MAX_PIXELS": {"string_value": "lots"}}})
    with pytest.raises(check.StageError, match="MAX_IMAGE_BYTES must be > 0"):
        check.Limits.from_config({"parameters": {"MAX_IMAGE_BYTES": {"string_value": "0"}}})
