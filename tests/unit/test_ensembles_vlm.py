"""The VLM pipeline's stages, run directly in Python (no Triton): preprocessor, encoder, text head."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from tests._examples import load_example

ROOT = Path(__file__).resolve().parents[2]


reference = load_example("ensembles/reference.py")
pre = reference.load_stage("vlm/image_preprocessor.py")
head = reference.load_stage("vlm/vlm_model.py")
GRID = 16


def _png(image: Image.Image) -> np.ndarray:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return np.frombuffer(buffer.getvalue(), dtype=np.uint8)


def _grid(colour_of: Any) -> np.ndarray:
    """REGION_COLOURS [3, G, G] with colour_of(row, column) -> (r, g, b)."""
    return np.array(
        [[colour_of(r, c) for c in range(GRID)] for r in range(GRID)], dtype=np.float32
    ).transpose(2, 0, 1)


# -- image_preprocessor ------------------------------------------------------------------------


def test_preprocess_normalises_with_imagenet_statistics_when_image_is_one_colour() -> None:
    raw = _png(Image.new("RGB", (50, 30), (255, 128, 0)))
    pixels = pre.preprocess(raw)
    assert pixels.shape == (3, 224, 224) and pixels.dtype == np.float32
    expected = (np.array([255, 128, 0]) / 255.0 - pre.MEAN) / pre.STD
    np.testing.assert_allclose(pixels.reshape(3, -1).mean(axis=1), expected, atol=1e-5)
    np.testing.assert_allclose(pixels.reshape(3, -1).std(axis=1), 0.0, atol=1e-5)


def test_preprocess_keeps_left_and_right_when_image_is_split() -> None:
    image = Image.new("RGB", (100, 100), (0, 0, 0))
    image.paste((255, 255, 255), (50, 0, 100, 100))
    pixels = pre.preprocess(_png(image))
    assert pixels[0, :, :100].max() < 0 < pixels[0, :, 124:].min()


def test_preprocess_raises_stage_error_when_bytes_are_not_an_image() -> None:
    with pytest.raises(pre.StageError, match="not a readable image"):
        pre.preprocess(np.frombuffer(b"definitely not a PNG", dtype=np.uint8))


def test_preprocess_raises_stage_error_when_raw_image_is_empty() -> None:
    with pytest.raises(pre.StageError, match="empty"):
        pre.preprocess(np.zeros(0, dtype=np.uint8))


# -- vision_encoder (ONNX) ---------------------------------------------------------------------


def _sobel_magnitude_zero_padded(luma: np.ndarray) -> np.ndarray:
    kx = np.array([[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]], dtype=np.float64) / 4.0
    p = np.pad(luma, 1)
    gx = np.zeros_like(luma)
    gy = np.zeros_like(luma)
    for dy in range(3):
        for dx in range(3):
            window = p[dy : dy + luma.shape[0], dx : dx + luma.shape[1]]
            gx += kx[dy, dx] * window
            gy += kx.T[dy, dx] * window
    return np.sqrt(gx**2 + gy**2)


def test_vision_encoder_matches_numpy_region_statistics_when_given_random_pixels() -> None:
    pytest.importorskip("onnxruntime")
    rgb = np.random.default_rng(3).uniform(0, 1, size=(224, 224, 3))
    pixels = ((rgb - pre.MEAN) / pre.STD).transpose(2, 0, 1).astype(np.float32)
    colours, detail = reference.run_onnx("make_vision_encoder", {"PIXELS": pixels})

    cell = 224 // GRID
    expected_colours = rgb.reshape(GRID, cell, GRID, cell, 3).mean(axis=(1, 3)).transpose(2, 0, 1)
    np.testing.assert_allclose(colours, expected_colours, atol=1e-4)
    magnitude = _sobel_magnitude_zero_padded(rgb @ np.array([0.299, 0.587, 0.114]))
    np.testing.assert_allclose(detail, magnitude.reshape(GRID, cell, GRID, cell).mean(axis=(1, 3)), atol=1e-4)


# -- vlm_model (text head) ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rgb", "family"),
    [
        ((1.0, 0.0, 0.0), "red"),
        ((1.0, 0.55, 0.0), "orange"),
        ((0.5, 0.3, 0.1), "brown"),
        ((1.0, 1.0, 0.0), "yellow"),
        ((0.0, 0.8, 0.0), "green"),
        ((0.0, 0.8, 0.8), "cyan"),
        ((0.0, 0.0, 1.0), "blue"),
        ((0.6, 0.2, 0.8), "purple"),
        ((1.0, 0.4, 0.7), "pink"),
        ((1.0, 1.0, 1.0), "white"),
        ((0.5, 0.5, 0.5), "grey"),
        ((0.05, 0.05, 0.05), "black"),
    ],
)
def test_colour_family_names_the_hue_when_given_clear_colours(
    rgb: tuple[float, float, float], family: str
) -> None:
    assert head.colour_family(*rgb) == family


def test_colour_name_adds_lightness_when_colour_is_dark_or_pale() -> None:
    assert head.colour_name(0.3, 0.0, 0.0) == "dark red"
    assert head.colour_name(0.6, 0.75, 0.95) == "light blue"
    assert head.colour_name(0.0, 0.0, 1.0) == "blue"


def test_answer_reports_shares_and_position_when_image_is_half_red_half_blue() -> None:
    colours = _grid(lambda r, c: (1.0, 0.0, 0.0) if c < GRID // 2 else (0.0, 0.0, 1.0))
    detail = np.zeros((GRID, GRID), dtype=np.float32)
    assert head.answer("What colours are there?", colours, detail) == (
        "The dominant colours are blue (50%) and red (50%)."
    )
    assert head.answer("Where is the red?", colours, detail) == (
        "Yes, red covers about 50% of the image, mostly at the left."
    )


def test_answer_says_colour_is_absent_when_query_names_a_missing_colour() -> None:
    colours = _grid(lambda r, c: (1.0, 0.0, 0.0))
    text = head.answer("Is there any green?", colours, np.zeros((GRID, GRID), dtype=np.float32))
    assert text == "I see no green; the main colours are red."


def test_answer_finds_brightest_and_darkest_zone_when_asked_about_brightness() -> None:
    colours = _grid(lambda r, c: ((c + (GRID - 1 - r)) / 30.0,) * 3)  # brighter up and to the right
    text = head.answer("How bright is it?", colours, np.zeros((GRID, GRID), dtype=np.float32))
    assert "the brightest area is the top right and the darkest the bottom left" in text
    assert "mean luminance 0.50" in text


def test_answer_locates_detail_when_asked_about_texture() -> None:
    colours = _grid(lambda r, c: (0.5, 0.5, 0.5))
    detail = np.zeros((GRID, GRID), dtype=np.float32)
    detail[GRID - 4 :, :4] = 0.5
    text = head.answer("Where is the texture?", colours, detail)
    assert "most detail is at the bottom left" in text


def test_answer_describes_the_image_when_query_has_no_keywords() -> None:
    colours = _grid(lambda r, c: (0.1, 0.3, 0.9) if r < GRID // 2 else (0.2, 0.7, 0.2))
    text = head.answer("hello", colours, np.zeros((GRID, GRID), dtype=np.float32))
    assert text.startswith("The dominant colours are blue (50%) and green (50%).")
    assert "Layout: blue at the top; green at the bottom." in text


def test_answer_raises_stage_error_when_feature_shapes_disagree() -> None:
    with pytest.raises(head.StageError, match="REGION_COLOURS"):
        head.answer("hi", np.zeros((3, 8, 8), np.float32), np.zeros((16, 16), np.float32))


def test_decode_query_raises_stage_error_when_query_is_too_long() -> None:
    with pytest.raises(head.StageError, match="limit"):
        head.decode_query(b"x" * (head.MAX_QUERY_CHARS + 1))


def test_vlm_pipeline_answers_about_the_sample_image_when_run_in_process() -> None:
    pytest.importorskip("onnxruntime")
    raw = reference.sample_bytes()
    assert reference.vlm(raw, "Is there any yellow?").endswith("mostly at the top right.")
    described = reference.vlm(raw, "Describe the image.")
    assert described.startswith("The dominant colours are blue (")
    assert "green at the bottom" in described and "red at the left" in described
