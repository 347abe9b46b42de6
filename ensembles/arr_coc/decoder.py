"""Triton Python model ``arr_coc_decoder``: relevance map + query -> text (a decoder stand-in).

Inputs: ``TEXT_QUERY`` BYTES [1]; ``RELEVANCE`` FP32 [14, 14] and ``TOKEN_BUDGET`` INT32
[14, 14] and ``BALANCE`` FP32 [3] from the opponent processor; ``TEXTURE`` FP32
[1, 13, 224, 224] from texture_array. Output: ``GENERATED_TEXT`` BYTES [1].

It says where relevance concentrates for the query, what is there (colour, brightness,
edges, read from the texture array under the focal patches), how the visual-token budget is
spent and how the opponent processor balanced its three scorers. In a production ARR-COC
pipeline this is the language model that consumes the variable-resolution visual tokens;
swap it in behind the same tensor names.

Like a language model it reads its inputs first (the "prefill": shapes, the peak) and then
writes the text piece by piece (``decode_fragments``): the focus region, the patch statistics
and the token shares are each computed only when the text reaches them. The same file serves
``arr_coc_decoder`` (unary: the pieces joined) and ``arr_coc_decoder_stream`` (decoupled: one
response per piece, optional ``MAX_TOKENS`` INT32 [1]); ``text_stream.py`` does the serving.

Needs numpy, ``triton_python_backend_utils`` and its siblings ``scene_names.py`` and
``text_stream.py`` (copied beside this file by the spec's ``files:``); the stage is the plain
function ``decode`` (or ``decode_fragments``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np
from scene_names import colour_name, where  # shipped beside model.py (files:)
from text_stream import StageError, TextGenerator, word_pieces  # shipped beside model.py (files:)

try:
    import triton_python_backend_utils as pb_utils
except ImportError:  # imported outside Triton: tests call the stage functions directly
    pb_utils = None

__all__ = [
    "StageError", "colour_name", "connected_region", "decode", "decode_fragments", "decode_query", "where",
]

MAX_QUERY_CHARS = 2000
#: patches with at least this relevance form the focus
FOCUS_THRESHOLD = 0.6
#: texture channel indices (texture_array.CHANNELS)
CH_RGB, CH_LUMA, CH_GRAD = (0, 1, 2), 6, 9


# -- the stage ----------------------------------------------------------------------------------


def _patch_means(texture: np.ndarray, grid: int) -> np.ndarray:
    """[C, H, W] -> [C, grid, grid] means over equal patches."""
    channels, height, width = texture.shape
    ph, pw = height // grid, width // grid
    cropped = texture[:, : ph * grid, : pw * grid].astype(np.float64)
    return cropped.reshape(channels, grid, ph, grid, pw).mean(axis=(2, 4))


def connected_region(mask: np.ndarray, seed: tuple[int, int]) -> np.ndarray:
    """The 4-connected region of True cells in ``mask`` that contains ``seed``."""
    region = np.zeros_like(mask, dtype=bool)
    if not mask[seed]:
        return region
    stack = [seed]
    region[seed] = True
    while stack:
        row, column = stack.pop()
        for r, c in ((row - 1, column), (row + 1, column), (row, column - 1), (row, column + 1)):
            if 0 <= r < mask.shape[0] and 0 <= c < mask.shape[1] and mask[r, c] and not region[r, c]:
                region[r, c] = True
                stack.append((r, c))
    return region


def _describe(patches: np.ndarray, focus: np.ndarray) -> str:
    rgb = [float(patches[c][focus].mean()) for c in CH_RGB]
    luma = float(patches[CH_LUMA][focus].mean())
    grad = float(patches[CH_GRAD][focus].mean())
    light = "bright" if luma >= 0.65 else "dark" if luma < 0.3 else "mid-toned"
    edges = "strong edges" if grad >= 0.08 else "little texture" if grad < 0.02 else "some texture"
    return f"a {light} {colour_name(*rgb)} area with {edges}"


def _elsewhere(count: int) -> str:
    if count == 0:
        return ""
    return f"; {count} more relevant patch{'es' if count > 1 else ''} elsewhere"


def decode_fragments(
    query: str,
    relevance: np.ndarray,
    tokens: np.ndarray,
    weights: np.ndarray,
    texture: np.ndarray,
) -> Iterator[str]:
    """The stage as a stream: relevance map, token budget, balance and texture -> text fragments.

    The shapes are checked first, so bad inputs raise StageError before the first fragment;
    each clause is computed only when the text reaches it.
    """
    relevance = np.asarray(relevance, dtype=np.float64)
    tokens = np.asarray(tokens)
    texture = np.asarray(texture).reshape(np.shape(texture)[-3:])
    if relevance.ndim != 2 or relevance.shape != tokens.shape or relevance.shape[0] != relevance.shape[1]:
        raise StageError(
            f"RELEVANCE and TOKEN_BUDGET must be the same square grid; got {list(relevance.shape)} "
            f"and {list(tokens.shape)}"
        )
    w_prop, w_pers, w_part = (float(w) for w in weights)
    shown = query if len(query) <= 80 else query[:77] + "..."
    lead = f'For "{shown}"' if query else "With no query"
    if w_part < 0.05:
        lead += " (no visual cue in the query, so relevance follows the image alone)"
    yield f"{lead}, "
    relevant = relevance >= min(FOCUS_THRESHOLD, float(relevance.max()))
    peak_row, peak_column = (int(i) for i in np.unravel_index(int(np.argmax(relevance)), relevance.shape))
    focus = connected_region(relevant, (peak_row, peak_column))
    yield f"the focus is {where(focus)}: "
    yield _describe(_patch_means(texture, relevance.shape[0]), focus)
    yield f" ({int(focus.sum())} of {relevance.size} patches around row {peak_row}, column {peak_column}"
    yield f"{_elsewhere(int((relevant & ~focus).sum()))}). "
    total = int(tokens.sum())
    focus_share = float(tokens[focus].sum()) / max(total, 1)
    yield f"It receives {round(focus_share * 100)}% of the {total} visual tokens "
    yield f"({int(tokens.max())} per patch at most, {int(tokens.min())} at least). "
    yield (
        f"Balance: query {round(w_part * 100)}%, information {round(w_prop * 100)}%, "
        f"salience {round(w_pers * 100)}%."
    )


def decode(
    query: str,
    relevance: np.ndarray,
    tokens: np.ndarray,
    weights: np.ndarray,
    texture: np.ndarray,
) -> str:
    """The stage: the relevance map, token budget, balance and texture -> one paragraph."""
    return "".join(word_pieces(decode_fragments(query, relevance, tokens, weights, texture)))


def decode_query(value: Any) -> str:
    """The TEXT_QUERY element as text (BYTES tensors arrive as bytes)."""
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    if len(text) > MAX_QUERY_CHARS:
        raise StageError(f"TEXT_QUERY has {len(text)} characters; the limit is {MAX_QUERY_CHARS}")
    return " ".join(text.split())


def request_fragments(inputs: dict[str, np.ndarray]) -> Iterator[str]:
    """One request's input tensors -> the text's fragments (what the Triton model serves)."""
    query_tensor = inputs["TEXT_QUERY"]
    if query_tensor.size == 0:
        raise StageError("TEXT_QUERY is empty: send one UTF-8 string")
    return decode_fragments(
        decode_query(query_tensor.ravel()[0]),
        inputs["RELEVANCE"],
        inputs["TOKEN_BUDGET"],
        inputs["BALANCE"],
        inputs["TEXTURE"],
    )


class TritonPythonModel:
    """Triton entry point; one instance per configured model instance (unary or decoupled)."""

    def initialize(self, args: dict[str, Any]) -> None:
        self.config = json.loads(args["model_config"])
        self.generator = TextGenerator(args, self.config, pb_utils, request_fragments)

    def execute(self, requests: list[Any]) -> list[Any] | None:
        return self.generator.execute(requests)

    def finalize(self) -> None:
        self.generator.finalize()
