"""Triton Python model ``arr_coc_decoder``: relevance map + query -> text (a decoder stand-in).

Inputs: ``TEXT_QUERY`` BYTES [1]; ``RELEVANCE`` FP32 [14, 14] and ``TOKEN_BUDGET`` INT32
[14, 14] and ``BALANCE`` FP32 [3] from the opponent processor; ``TEXTURE`` FP32
[1, 13, 224, 224] from texture_array. Output: ``GENERATED_TEXT`` BYTES [1].

It says where relevance concentrates for the query, what is there (colour, brightness,
edges, read from the texture array under the focal patches), how the visual-token budget is
spent and how the opponent processor balanced its three scorers. In a production ARR-COC
pipeline this is the language model that consumes the variable-resolution visual tokens;
swap it in behind the same tensor names.

Self-contained on purpose (numpy and ``triton_python_backend_utils`` only); the stage is the
plain function ``decode``.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

try:
    import triton_python_backend_utils as pb_utils
except ImportError:  # imported outside Triton: tests call the stage functions directly
    pb_utils = None

MAX_QUERY_CHARS = 2000
#: patches with at least this relevance form the focus
FOCUS_THRESHOLD = 0.6
#: texture channel indices (texture_array.CHANNELS)
CH_RGB, CH_LUMA, CH_GRAD = (0, 1, 2), 6, 9


class StageError(ValueError):
    """A request this stage cannot process; the message goes back to the client."""


# -- colour and position naming (the same rules as vlm/vlm_model.py; a unit test keeps them in step)


def colour_family(r: float, g: float, b: float) -> str:
    """The basic colour family of an RGB colour in [0, 1], from its hue, saturation and value."""
    high, low = max(r, g, b), min(r, g, b)
    value = high
    saturation = 0.0 if high <= 0 else (high - low) / high
    if value < 0.18:
        return "black"
    if saturation < 0.18:
        return "white" if value > 0.85 else "grey"
    span = high - low
    if high == r:
        hue = (60.0 * (g - b) / span) % 360.0
    elif high == g:
        hue = 60.0 * (b - r) / span + 120.0
    else:
        hue = 60.0 * (r - g) / span + 240.0
    if hue < 15 or hue >= 345:
        return "red"
    if hue < 40:
        return "orange" if value >= 0.65 else "brown"
    if hue < 70:
        return "yellow" if value >= 0.55 else "olive"
    if hue < 165:
        return "green"
    if hue < 195:
        return "cyan"
    if hue < 255:
        return "blue"
    if hue < 290:
        return "purple"
    return "pink"


def colour_name(r: float, g: float, b: float) -> str:
    """A colour's family with a lightness qualifier ('dark red', 'light blue', 'white')."""
    family = colour_family(r, g, b)
    if family in ("black", "white", "grey", "brown", "olive"):
        return family
    high, low = max(r, g, b), min(r, g, b)
    saturation = (high - low) / high
    if high < 0.45:
        return f"dark {family}"
    if saturation < 0.45 and high > 0.75:
        return f"light {family}"
    return family


_ROWS = ("top", "middle", "bottom")
_COLUMNS = ("left", "centre", "right")


def zone_name(row: int, column: int) -> str:
    """Name one cell of a 3x3 split of the image ('top left', 'top', 'centre', ...)."""
    vertical = "" if row == 1 else _ROWS[row]
    horizontal = "" if column == 1 else _COLUMNS[column]
    return " ".join(p for p in (vertical, horizontal) if p) or "centre"


def where(mask: np.ndarray) -> str:
    """Where the True cells of a 2-D mask lie, by their centre of mass ('at the top right')."""
    rows, columns = np.nonzero(mask)
    if rows.size == 0:
        return "nowhere"
    # Centre of mass in thirds of the image: 0, 1 or 2 for each axis.
    row = int(np.clip((rows.mean() + 0.5) * 3 // mask.shape[0], 0, 2))
    column = int(np.clip((columns.mean() + 0.5) * 3 // mask.shape[1], 0, 2))
    return f"at the {zone_name(row, column)}"


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


def decode(
    query: str,
    relevance: np.ndarray,
    tokens: np.ndarray,
    weights: np.ndarray,
    texture: np.ndarray,
) -> str:
    """The stage: the relevance map, token budget, balance and texture -> one paragraph."""
    relevance = np.asarray(relevance, dtype=np.float64)
    tokens = np.asarray(tokens)
    texture = np.asarray(texture).reshape(np.shape(texture)[-3:])
    if relevance.ndim != 2 or relevance.shape != tokens.shape or relevance.shape[0] != relevance.shape[1]:
        raise StageError(
            f"RELEVANCE and TOKEN_BUDGET must be the same square grid; got {list(relevance.shape)} "
            f"and {list(tokens.shape)}"
        )
    grid = relevance.shape[0]
    patches = _patch_means(texture, grid)
    relevant = relevance >= min(FOCUS_THRESHOLD, float(relevance.max()))
    peak_row, peak_column = (int(i) for i in np.unravel_index(int(np.argmax(relevance)), relevance.shape))
    focus = connected_region(relevant, (peak_row, peak_column))
    elsewhere = int((relevant & ~focus).sum())
    total = int(tokens.sum())
    focus_share = float(tokens[focus].sum()) / max(total, 1)
    w_prop, w_pers, w_part = (float(w) for w in weights)
    shown = query if len(query) <= 80 else query[:77] + "..."
    lead = f'For "{shown}"' if query else "With no query"
    if w_part < 0.05:
        lead += " (no visual cue in the query, so relevance follows the image alone)"
    return (
        f"{lead}, the focus is {where(focus)}: {_describe(patches, focus)} "
        f"({int(focus.sum())} of {relevance.size} patches around row {peak_row}, column {peak_column}"
        f"{_elsewhere(elsewhere)}). "
        f"It receives {round(focus_share * 100)}% of the {total} visual tokens "
        f"({int(tokens.max())} per patch at most, {int(tokens.min())} at least). "
        f"Balance: query {round(w_part * 100)}%, information {round(w_prop * 100)}%, "
        f"salience {round(w_pers * 100)}%."
    )


def decode_query(value: Any) -> str:
    """The TEXT_QUERY element as text (BYTES tensors arrive as bytes)."""
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    if len(text) > MAX_QUERY_CHARS:
        raise StageError(f"TEXT_QUERY has {len(text)} characters; the limit is {MAX_QUERY_CHARS}")
    return " ".join(text.split())


class TritonPythonModel:
    """Triton entry point; one instance per configured model instance."""

    def initialize(self, args: dict[str, Any]) -> None:
        self.config = json.loads(args["model_config"])

    def execute(self, requests: list[Any]) -> list[Any]:
        responses = []
        for request in requests:
            try:
                def tensor(name: str, request: Any = request) -> np.ndarray:
                    return pb_utils.get_input_tensor_by_name(request, name).as_numpy()

                query_tensor = tensor("TEXT_QUERY")
                if query_tensor.size == 0:
                    raise StageError("TEXT_QUERY is empty: send one UTF-8 string")
                text = decode(
                    decode_query(query_tensor.ravel()[0]),
                    tensor("RELEVANCE"),
                    tensor("TOKEN_BUDGET"),
                    tensor("BALANCE"),
                    tensor("TEXTURE"),
                )
                out = np.array([text.encode("utf-8")], dtype=np.object_)
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("GENERATED_TEXT", out)]))
            except StageError as exc:
                # bad client input: INVALID_ARGUMENT (HTTP 400), not an internal error
                error = pb_utils.TritonError(str(exc), pb_utils.TritonError.INVALID_ARG)
                responses.append(pb_utils.InferenceResponse(error=error))
        return responses
