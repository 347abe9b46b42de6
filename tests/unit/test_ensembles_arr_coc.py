"""The ARR-COC pipeline's stages, run directly in Python (no Triton).

The three ONNX scorers are checked against independent numpy implementations of what their
docstrings promise; the Python stages against hand-computed cases.
"""

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
texture_mod = reference.load_stage("arr_coc/texture_array.py")
query_mod = reference.load_stage("arr_coc/query_encoder.py")
opponent = reference.load_stage("arr_coc/opponent_processor.py")
decoder = reference.load_stage("arr_coc/decoder.py")
models = reference.load_stage("onnx_models.py")
GRID, PATCH = 14, 16


def _png(image: Image.Image) -> np.ndarray:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return np.frombuffer(buffer.getvalue(), dtype=np.uint8)


def _red_square_image() -> np.ndarray:
    """Grey image with a red square in the top-left corner (patches rows/cols 1-3)."""
    image = Image.new("RGB", (224, 224), (128, 128, 128))
    image.paste((220, 30, 30), (16, 16, 64, 64))
    return _png(image)


# -- texture_array -------------------------------------------------------------------------------


def test_rgb_to_lab_matches_cie_values_when_given_white_and_primaries() -> None:
    lab = texture_mod.rgb_to_lab(np.array([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]))
    np.testing.assert_allclose(lab[0], [100.0, 0.0, 0.0], atol=0.05)
    np.testing.assert_allclose(lab[1], [53.24, 80.09, 67.20], atol=0.05)
    np.testing.assert_allclose(lab[2], [32.30, 79.19, -107.86], atol=0.05)


def test_box_mean_equals_a_naive_window_mean_when_edges_are_replicated() -> None:
    image = np.random.default_rng(0).uniform(size=(10, 12))
    padded = np.pad(image, 1, mode="edge")
    naive = np.array([[padded[r : r + 3, c : c + 3].mean() for c in range(12)] for r in range(10)])
    np.testing.assert_allclose(texture_mod.box_mean(image, 3), naive, atol=1e-12)


def test_sobel_responds_only_in_x_when_image_has_a_vertical_step_edge() -> None:
    image = np.zeros((8, 10))
    image[:, 5:] = 1.0
    gx, gy = texture_mod.sobel(image)
    np.testing.assert_allclose(gx[:, 4:6], 1.0)
    np.testing.assert_allclose(np.delete(gx, [4, 5], axis=1), 0.0)
    np.testing.assert_allclose(gy, 0.0)


def test_features_eccentricity_is_high_for_stripes_and_zero_when_image_is_flat() -> None:
    x = np.linspace(0, 8 * np.pi, 64)
    stripes = np.repeat((0.5 + 0.5 * np.sin(x))[None, :, None], 64, axis=0).repeat(3, axis=2)
    assert texture_mod.features(stripes)[12, 8:-8, 8:-8].mean() > 0.95
    assert texture_mod.features(np.full((64, 64, 3), 0.4))[12].max() == 0.0


def test_texture_array_returns_13_channels_with_rgb_first_when_given_a_png() -> None:
    texture = texture_mod.texture_array(_png(Image.new("RGB", (40, 40), (255, 0, 0))))
    assert texture.shape == (1, 13, 224, 224) and texture.dtype == np.float32
    np.testing.assert_allclose(texture[0, :3].reshape(3, -1).mean(axis=1), [1.0, 0.0, 0.0])
    assert len(texture_mod.CHANNELS) == 13


def test_texture_array_raises_stage_error_when_bytes_are_not_an_image() -> None:
    with pytest.raises(texture_mod.StageError, match="not a readable image"):
        texture_mod.texture_array(np.frombuffer(b"GIF? no", dtype=np.uint8))


# -- query_encoder -------------------------------------------------------------------------------


def test_encode_query_weights_the_lab_a_channel_when_query_mentions_red() -> None:
    embedding = query_mod.encode_query("Find the RED car")
    assert embedding.shape == (64,) and embedding.dtype == np.float32
    assert embedding[query_mod.LAB_A] == 2.0 and embedding[query_mod.R] == 0.5
    assert abs(float(np.linalg.norm(embedding[query_mod.NGRAM_START :])) - 1.0) < 1e-6


def test_encode_query_has_only_ngram_features_when_query_has_no_visual_words() -> None:
    embedding = query_mod.encode_query("hello there")
    assert not embedding[: query_mod.NGRAM_START].any()
    assert np.array_equal(embedding, query_mod.encode_query("  Hello   there "))
    assert not np.array_equal(embedding, query_mod.encode_query("hello world"))


def test_encode_query_caps_the_concept_weights_when_query_repeats_words() -> None:
    embedding = query_mod.encode_query("red " * 50)
    assert np.linalg.norm(embedding[: query_mod.NGRAM_START]) == pytest.approx(query_mod.MAX_CONCEPT_NORM)


# -- the ONNX scorers against numpy ---------------------------------------------------------------


def _pool(x: np.ndarray) -> np.ndarray:
    n, c = x.shape[:2]
    return x.reshape(n, c, GRID, PATCH, GRID, PATCH).mean(axis=(3, 5))


def _surround(x: np.ndarray) -> np.ndarray:
    """5x5 mean over the patch grid, averaging only cells inside the grid."""
    out = np.zeros_like(x)
    for r in range(GRID):
        for c in range(GRID):
            out[..., r, c] = x[..., max(0, r - 2) : r + 3, max(0, c - 2) : c + 3].mean(axis=(-2, -1))
    return out


def _by_max(x: np.ndarray) -> np.ndarray:
    return x / (x.max(axis=(1, 2, 3), keepdims=True) + 1e-6)


def _numpy_propositional(t: np.ndarray) -> np.ndarray:
    pooled = _pool(t)
    luma = t[:, 6:7]
    patch_sd = np.sqrt(np.maximum(_pool(luma**2) - _pool(luma) ** 2, 0))
    info = 0.5 * pooled[:, 9:10] + 0.25 * np.sqrt(pooled[:, 11:12]) + 0.25 * patch_sd
    return _by_max(info)[:, 0]


def _numpy_perspectival(t: np.ndarray) -> np.ndarray:
    lab = _pool(t)[:, 3:6]
    local = np.sqrt(((lab - _surround(lab)) ** 2).sum(axis=1, keepdims=True))
    rarity = np.sqrt(((lab - lab.mean(axis=(2, 3), keepdims=True)) ** 2).sum(axis=1, keepdims=True))
    return _by_max(0.6 * local + 0.4 * rarity)[:, 0]


def _numpy_participatory(t: np.ndarray, q: np.ndarray) -> np.ndarray:
    pooled = _pool(t)
    mean = pooled.mean(axis=(2, 3), keepdims=True)
    z = (pooled - mean) / np.sqrt(((pooled - mean) ** 2).mean(axis=(2, 3), keepdims=True) + 1e-6)
    w = q @ models.query_projection()
    x, y = models.position_grids()
    score = np.einsum("nc,nchw->nhw", w[:, :13], z) + w[:, 13, None, None] * x + w[:, 14, None, None] * y
    score = score / (1.0 + np.linalg.norm(w, axis=1))[:, None, None]
    return 1.0 / (1.0 + np.exp(-models.PARTICIPATORY_GAIN * (score - models.PARTICIPATORY_THRESHOLD)))


@pytest.fixture(scope="module")
def batch() -> tuple[np.ndarray, np.ndarray]:
    """Two texture arrays (random, and the sample image's) and two query embeddings."""
    rng = np.random.default_rng(11)
    random_texture = rng.uniform(0.0, 1.0, size=(1, 13, 224, 224)).astype(np.float32)
    textures = np.concatenate([random_texture, texture_mod.texture_array(reference.sample_bytes())])
    queries = np.stack([query_mod.encode_query("bright red edges"), query_mod.encode_query("top left")])
    return textures, queries


def test_propositional_scorer_matches_numpy_when_given_a_batch_of_two(batch: Any) -> None:
    pytest.importorskip("onnxruntime")
    textures, _ = batch
    (out,) = reference.run_onnx("make_propositional_scorer", {"TEXTURE": textures})
    assert out.shape == (2, GRID, GRID)
    np.testing.assert_allclose(out, _numpy_propositional(textures.astype(np.float64)), atol=2e-4)


def test_perspectival_scorer_matches_numpy_when_given_a_batch_of_two(batch: Any) -> None:
    pytest.importorskip("onnxruntime")
    textures, _ = batch
    (out,) = reference.run_onnx("make_perspectival_scorer", {"TEXTURE": textures})
    np.testing.assert_allclose(out, _numpy_perspectival(textures.astype(np.float64)), atol=2e-4)


def test_participatory_scorer_matches_numpy_when_given_a_batch_of_two(batch: Any) -> None:
    pytest.importorskip("onnxruntime")
    textures, queries = batch
    feeds = {"TEXTURE": textures, "QUERY_EMBEDDING": queries}
    (out,) = reference.run_onnx("make_participatory_scorer", feeds)
    expected = _numpy_participatory(textures.astype(np.float64), queries.astype(np.float64))
    np.testing.assert_allclose(out, expected, atol=2e-4)


def test_participatory_scorer_peaks_on_the_red_square_when_query_asks_for_red() -> None:
    pytest.importorskip("onnxruntime")
    texture = texture_mod.texture_array(_red_square_image())
    embedding = query_mod.encode_query("red")[None]
    feeds = {"TEXTURE": texture, "QUERY_EMBEDDING": embedding}
    (out,) = reference.run_onnx("make_participatory_scorer", feeds)
    row, column = np.unravel_index(int(np.argmax(out[0])), (GRID, GRID))
    assert 1 <= row <= 3 and 1 <= column <= 3
    assert out[0, 8:, 8:].max() < 0.05 < 0.9 < out[0, 2, 2]


# -- opponent_processor --------------------------------------------------------------------------


def test_allocate_sums_to_the_total_within_limits_when_weights_are_skewed() -> None:
    weights = np.zeros((GRID, GRID))
    weights[0, 0] = 100.0
    weights[5, 5:9] = 1.0
    budget = opponent.Budget(total_tokens=1000, min_tokens=2, max_tokens=40)
    tokens = opponent.allocate(weights + 0.01, budget)
    assert tokens.dtype == np.int32 and int(tokens.sum()) == 1000
    assert tokens.min() >= 2 and tokens.max() == 40 and tokens[0, 0] == 40
    assert (tokens[5, 5:9] > np.median(tokens)).all()


def test_allocate_spreads_evenly_when_weights_are_all_zero() -> None:
    tokens = opponent.allocate(np.zeros((GRID, GRID)), opponent.Budget(total_tokens=GRID * GRID * 3))
    assert (tokens == 3).all()


def test_budget_check_raises_stage_error_when_total_cannot_fit_the_limits() -> None:
    with pytest.raises(opponent.StageError, match="TOTAL_TOKENS"):
        opponent.Budget(total_tokens=10_000, max_tokens=32).check(GRID * GRID)


def test_budget_from_config_reads_parameters_and_rejects_bad_numbers() -> None:
    params = {"TOTAL_TOKENS": {"string_value": "512"}, "EXPLORATION": {"string_value": "0.1"}}
    budget = opponent.Budget.from_config({"parameters": params})
    assert budget == opponent.Budget(total_tokens=512, exploration=0.1)
    with pytest.raises(opponent.StageError, match="TOTAL_TOKENS must be a int"):
        opponent.Budget.from_config({"parameters": {"TOTAL_TOKENS": {"string_value": "lots"}}})


def test_balance_ignores_the_query_map_when_it_is_flat() -> None:
    rng = np.random.default_rng(5)
    prop, pers = rng.uniform(size=(2, 1, GRID, GRID))
    relevance, tokens, weights = opponent.balance(prop, pers, np.full((1, GRID, GRID), 0.02))
    assert weights[2] == 0.0 and weights.sum() == pytest.approx(1.0)
    assert relevance.max() == pytest.approx(1.0) and relevance.min() == pytest.approx(0.0)
    assert int(tokens.sum()) == opponent.Budget().total_tokens


def test_balance_follows_a_decisive_query_map_when_it_has_full_contrast() -> None:
    flat = np.zeros((1, GRID, GRID))
    part = np.full((1, GRID, GRID), 0.01)
    part[0, 10, 3] = 0.99
    relevance, tokens, weights = opponent.balance(flat, flat, part)
    assert weights[2] == pytest.approx(opponent.MAX_QUERY_WEIGHT)
    assert np.unravel_index(int(np.argmax(relevance)), relevance.shape) == (10, 3)
    assert tokens[10, 3] == opponent.Budget().max_tokens


# -- arr_coc_decoder -----------------------------------------------------------------------------


def test_connected_region_keeps_only_the_seeds_component() -> None:
    mask = np.zeros((5, 5), dtype=bool)
    mask[0, 0:2] = mask[1, 1] = True
    mask[4, 4] = True
    region = decoder.connected_region(mask, (0, 0))
    assert region.sum() == 3 and not region[4, 4]


def test_decode_describes_the_focus_when_relevance_peaks_on_a_red_square() -> None:
    texture = texture_mod.texture_array(_red_square_image())
    relevance = np.zeros((GRID, GRID), dtype=np.float32)
    relevance[1:4, 1:4] = 1.0
    tokens = opponent.allocate(relevance + 0.05, opponent.Budget())
    text = decoder.decode("red?", relevance, tokens, np.array([0.2, 0.2, 0.6]), texture)
    assert text.startswith('For "red?", the focus is at the top left: a mid-toned red area')
    assert "(9 of 196 patches around row 1, column 1)" in text
    assert "Balance: query 60%, information 20%, salience 20%." in text


def test_decode_raises_stage_error_when_maps_differ_in_shape() -> None:
    with pytest.raises(decoder.StageError, match="same square grid"):
        decoder.decode("q", np.zeros((14, 14)), np.zeros((7, 7)), np.zeros(3), np.zeros((13, 224, 224)))


# -- the whole pipeline in process ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("Where is the sun?", "the focus is at the top right: a bright yellow area"),
        ("Find the red house", "the focus is at the left: a mid-toned red area"),
    ],
)
def test_arr_coc_pipeline_focuses_on_the_object_when_query_names_it(query: str, expected: str) -> None:
    pytest.importorskip("onnxruntime")
    result = reference.arr_coc(reference.sample_bytes(), query)
    assert expected in result["GENERATED_TEXT"]
    assert int(result["TOKEN_BUDGET"].sum()) == 1024
    assert result["RELEVANCE_MAP"].shape == (GRID, GRID)
