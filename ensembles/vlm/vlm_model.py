"""Triton Python model ``vlm_model``: the VLM's text head, answering a question about an image.

Reads the vision encoder's features (``REGION_COLOURS`` FP32 [3, G, G]: mean RGB of each region
of a G x G grid; ``REGION_DETAIL`` FP32 [G, G]: mean edge strength) and the user's
``TEXT_QUERY`` BYTES [1], and writes ``GENERATED_TEXT`` BYTES [1].

This is a deterministic stand-in for a language decoder: it recognises what the question asks
about (colours, a named colour, brightness, layout, detail; otherwise it describes the image)
and answers from the features. A production VLM swaps this model for a real decoder (for
example a TensorRT-LLM or vLLM backend) behind the same tensor names.

Self-contained on purpose (numpy and ``triton_python_backend_utils`` only); the stage is the
plain function ``answer`` so tests can run it without Triton.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

try:
    import triton_python_backend_utils as pb_utils
except ImportError:  # imported outside Triton: tests call the stage functions directly
    pb_utils = None

MAX_QUERY_CHARS = 2000

FAMILIES = (
    "red", "orange", "yellow", "green", "cyan", "blue", "purple", "pink", "brown", "olive",
    "white", "grey", "black",
)
_SYNONYMS = {"gray": "grey", "violet": "purple", "teal": "cyan", "turquoise": "cyan"}
_COLOUR_WORDS = {"colour", "colours", "color", "colors", "hue", "hues", "palette", "coloured", "colored"}
_BRIGHTNESS_WORDS = {
    "bright", "brightness", "dark", "darkness", "dim", "lighting", "lit", "exposure",
    "exposed", "luminance", "light",
}
_LAYOUT_WORDS = {
    "where", "layout", "position", "positions", "located", "location", "left", "right", "top",
    "bottom", "arranged", "arrangement", "composition", "placed",
}
_DETAIL_WORDS = {
    "detail", "details", "detailed", "texture", "textured", "busy", "sharp", "edge", "edges",
    "smooth", "blurry", "blur", "pattern", "patterns",
}


class StageError(ValueError):
    """A request this stage cannot process; the message goes back to the client."""


# -- colour naming (the same rules as arr_coc/decoder.py; a unit test keeps them in step) -------


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


def extreme_zone(values: np.ndarray, *, highest: bool) -> str:
    """The 3x3 zone of the image with the highest (or lowest) mean value, by name."""
    rows, columns = np.indices(values.shape)
    zone = (rows * 3 // values.shape[0]) * 3 + columns * 3 // values.shape[1]
    means = np.array([values[zone == z].mean() for z in range(9)])
    best = int(np.argmax(means) if highest else np.argmin(means))
    return zone_name(best // 3, best % 3)


# -- the stage ----------------------------------------------------------------------------------


def _percent(share: float) -> str:
    return f"{round(share * 100)}%"


def _words(query: str) -> list[str]:
    return [_SYNONYMS.get(w, w) for w in re.findall(r"[a-z]+", query.lower())]


class _Scene:
    """What the text head knows about the image: per-region colour families, luminance, detail."""

    def __init__(self, colours: np.ndarray, detail: np.ndarray) -> None:
        if colours.ndim != 3 or colours.shape[0] != 3 or colours.shape[1:] != detail.shape:
            raise StageError(
                f"REGION_COLOURS must be [3, G, G] and REGION_DETAIL [G, G]; got {list(colours.shape)} "
                f"and {list(detail.shape)}"
            )
        rgb = np.clip(colours.astype(np.float64), 0.0, 1.0)
        self.families = np.array(
            [[colour_family(*rgb[:, i, j]) for j in range(rgb.shape[2])] for i in range(rgb.shape[1])]
        )
        self.names = {
            family: colour_name(*rgb[:, self.families == family].mean(axis=1))
            for family in set(self.families.ravel())
        }
        self.luma = 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2]
        self.detail = detail.astype(np.float64)
        families, counts = np.unique(self.families, return_counts=True)
        order = sorted(zip(families, counts, strict=True), key=lambda fc: (-fc[1], str(fc[0])))
        self.shares = [(str(f), int(c) / self.families.size) for f, c in order]

    def label(self, family: str) -> str:
        return self.names.get(family, family)

    def dominant(self) -> list[tuple[str, float]]:
        """Colour families covering at least 4% of the image, largest first (at most four)."""
        return [(f, s) for f, s in self.shares if s >= 0.04][:4] or self.shares[:1]


def _colours_sentence(scene: _Scene) -> str:
    parts = [f"{scene.label(f)} ({_percent(s)})" for f, s in scene.dominant()]
    listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + f" and {parts[-1]}"
    return f"The dominant colours are {listed}."


def _brightness_sentence(scene: _Scene) -> str:
    mean = float(scene.luma.mean())
    level = (
        "dark" if mean < 0.25 else "fairly dark" if mean < 0.45 else "moderately bright"
        if mean < 0.6 else "bright" if mean < 0.75 else "very bright"
    )
    return (
        f"The image is {level} (mean luminance {mean:.2f}); the brightest area is the "
        f"{extreme_zone(scene.luma, highest=True)} and the darkest the "
        f"{extreme_zone(scene.luma, highest=False)}."
    )


def _layout_sentence(scene: _Scene) -> str:
    parts = [f"{scene.label(f)} {where(scene.families == f)}" for f, _ in scene.dominant()]
    return "Layout: " + "; ".join(parts) + "."


def _detail_sentence(scene: _Scene) -> str:
    mean = float(scene.detail.mean())
    level = "smooth" if mean < 0.02 else "moderately detailed" if mean < 0.06 else "highly detailed"
    return (
        f"The image is {level} overall (edge strength {mean:.3f}); most detail is at the "
        f"{extreme_zone(scene.detail, highest=True)}, the smoothest area at the "
        f"{extreme_zone(scene.detail, highest=False)}."
    )


def _presence_sentence(scene: _Scene, family: str) -> str:
    mask = scene.families == family
    if not mask.any():
        listed = ", ".join(scene.label(f) for f, _ in scene.dominant())
        return f"I see no {family}; the main colours are {listed}."
    share = float(mask.mean())
    return f"Yes, {scene.label(family)} covers about {_percent(share)} of the image, mostly {where(mask)}."


def answer(query: str, colours: np.ndarray, detail: np.ndarray) -> str:
    """The stage: a question and the encoder's region features -> a one-paragraph answer."""
    scene = _Scene(colours, detail)
    words = _words(query)
    wordset = set(words)
    sentences: list[str] = []
    for family in dict.fromkeys(w for w in words if w in FAMILIES):
        sentences.append(_presence_sentence(scene, family))
    if wordset & _COLOUR_WORDS and not sentences:
        sentences.append(_colours_sentence(scene))
    if wordset & _BRIGHTNESS_WORDS:
        sentences.append(_brightness_sentence(scene))
    if wordset & _LAYOUT_WORDS and not any(w in FAMILIES for w in words):
        sentences.append(_layout_sentence(scene))
    if wordset & _DETAIL_WORDS:
        sentences.append(_detail_sentence(scene))
    if not sentences:  # "describe the image", or a question this head cannot parse
        sentences = [_colours_sentence(scene), _layout_sentence(scene), _brightness_sentence(scene)]
    return " ".join(sentences)


def decode_query(value: Any) -> str:
    """The TEXT_QUERY element as text (BYTES tensors arrive as bytes)."""
    try:
        text = value.decode("utf-8") if isinstance(value, bytes) else str(value)
    except UnicodeDecodeError as exc:
        raise StageError(f"TEXT_QUERY is not UTF-8 text (byte {exc.start} is invalid)") from None
    if len(text) > MAX_QUERY_CHARS:
        raise StageError(f"TEXT_QUERY has {len(text)} characters; the limit is {MAX_QUERY_CHARS}")
    return text.strip()


class TritonPythonModel:
    """Triton entry point; one instance per configured model instance."""

    def initialize(self, args: dict[str, Any]) -> None:
        self.config = json.loads(args["model_config"])

    def execute(self, requests: list[Any]) -> list[Any]:
        responses = []
        for request in requests:
            try:
                query_tensor = pb_utils.get_input_tensor_by_name(request, "TEXT_QUERY").as_numpy()
                if query_tensor.size == 0:
                    raise StageError("TEXT_QUERY is empty: send one UTF-8 string")
                query = decode_query(query_tensor.ravel()[0])
                colours = pb_utils.get_input_tensor_by_name(request, "REGION_COLOURS").as_numpy()
                detail = pb_utils.get_input_tensor_by_name(request, "REGION_DETAIL").as_numpy()
                text = answer(query, colours, detail)
                out = np.array([text.encode("utf-8")], dtype=np.object_)
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("GENERATED_TEXT", out)]))
            except StageError as exc:
                # bad client input: INVALID_ARGUMENT (HTTP 400), not an internal error
                error = pb_utils.TritonError(str(exc), pb_utils.TritonError.INVALID_ARG)
                responses.append(pb_utils.InferenceResponse(error=error))
        return responses
