"""Triton Python model ``vlm_model``: the VLM's text head, answering a question about an image.

Reads the vision encoder's features (``REGION_COLOURS`` FP32 [3, G, G]: mean RGB of each region
of a G x G grid; ``REGION_DETAIL`` FP32 [G, G]: mean edge strength) and the user's
``TEXT_QUERY`` BYTES [1], and writes ``GENERATED_TEXT`` BYTES [1].

This is a deterministic stand-in for a language decoder: it recognises what the question asks
about (colours, a named colour, brightness, layout, detail; otherwise it describes the image)
and answers from the features. A production VLM swaps this model for a real decoder (for
example a TensorRT-LLM or vLLM backend) behind the same tensor names.

Like a language model it analyses its inputs first (``_Scene``: the "prefill") and then writes
the answer piece by piece (``answer_fragments``): each clause is computed only when the answer
reaches it. The same file serves ``vlm_model`` (unary: the pieces joined) and
``vlm_model_stream`` (decoupled: one response per piece, optional ``MAX_TOKENS`` INT32 [1]);
``text_stream.py`` does the serving.

Needs numpy, ``triton_python_backend_utils`` and its siblings ``scene_names.py`` and
``text_stream.py`` (copied beside this file by the spec's ``files:``); the stage is the plain
function ``answer`` (or ``answer_fragments``) so tests can run it without Triton.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from scene_names import colour_family, colour_name, extreme_zone, where  # shipped beside model.py
from text_stream import StageError, TextGenerator, word_pieces  # shipped beside model.py

try:
    import triton_python_backend_utils as pb_utils
except ImportError:  # imported outside Triton: tests call the stage functions directly
    pb_utils = None

__all__ = [
    "StageError", "answer", "answer_fragments", "colour_family", "colour_name", "decode_query", "where",
]

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


def _colours_sentence(scene: _Scene) -> Iterator[str]:
    yield "The dominant colours are "
    dominant = scene.dominant()
    for i, (family, share) in enumerate(dominant):
        if i:
            yield " and " if i == len(dominant) - 1 else ", "
        yield f"{scene.label(family)} ({_percent(share)})"
    yield "."


def _brightness_sentence(scene: _Scene) -> Iterator[str]:
    mean = float(scene.luma.mean())
    level = (
        "dark" if mean < 0.25 else "fairly dark" if mean < 0.45 else "moderately bright"
        if mean < 0.6 else "bright" if mean < 0.75 else "very bright"
    )
    yield f"The image is {level} (mean luminance {mean:.2f}); the brightest area is the "
    yield extreme_zone(scene.luma, highest=True)
    yield " and the darkest the "
    yield extreme_zone(scene.luma, highest=False)
    yield "."


def _layout_sentence(scene: _Scene) -> Iterator[str]:
    yield "Layout: "
    for i, (family, _) in enumerate(scene.dominant()):
        yield f"{'; ' if i else ''}{scene.label(family)} {where(scene.families == family)}"
    yield "."


def _detail_sentence(scene: _Scene) -> Iterator[str]:
    mean = float(scene.detail.mean())
    level = "smooth" if mean < 0.02 else "moderately detailed" if mean < 0.06 else "highly detailed"
    yield f"The image is {level} overall (edge strength {mean:.3f}); most detail is at the "
    yield extreme_zone(scene.detail, highest=True)
    yield ", the smoothest area at the "
    yield extreme_zone(scene.detail, highest=False)
    yield "."


def _presence_sentence(scene: _Scene, family: str) -> Iterator[str]:
    mask = scene.families == family
    if not mask.any():
        yield f"I see no {family}; the main colours are "
        yield ", ".join(scene.label(f) for f, _ in scene.dominant())
        yield "."
        return
    yield f"Yes, {scene.label(family)} covers about {_percent(float(mask.mean()))} of the image, "
    yield f"mostly {where(mask)}."


def answer_fragments(query: str, colours: np.ndarray, detail: np.ndarray) -> Iterator[str]:
    """The stage as a stream: a question and the region features -> the answer in fragments.

    The features are analysed first, so bad features raise StageError before the first
    fragment; each sentence is computed only when the answer reaches it.
    """
    scene = _Scene(colours, detail)
    words = _words(query)
    wordset = set(words)
    named = list(dict.fromkeys(w for w in words if w in FAMILIES))
    plan: list[Callable[[], Iterator[str]]] = [
        lambda family=family: _presence_sentence(scene, family) for family in named
    ]
    if wordset & _COLOUR_WORDS and not named:
        plan.append(lambda: _colours_sentence(scene))
    if wordset & _BRIGHTNESS_WORDS:
        plan.append(lambda: _brightness_sentence(scene))
    if wordset & _LAYOUT_WORDS and not named:
        plan.append(lambda: _layout_sentence(scene))
    if wordset & _DETAIL_WORDS:
        plan.append(lambda: _detail_sentence(scene))
    if not plan:  # "describe the image", or a question this head cannot parse
        plan = [lambda: _colours_sentence(scene), lambda: _layout_sentence(scene),
                lambda: _brightness_sentence(scene)]
    for i, sentence in enumerate(plan):
        if i:
            yield " "
        yield from sentence()


def answer(query: str, colours: np.ndarray, detail: np.ndarray) -> str:
    """The stage: a question and the encoder's region features -> a one-paragraph answer."""
    return "".join(word_pieces(answer_fragments(query, colours, detail)))


def decode_query(value: Any) -> str:
    """The TEXT_QUERY element as text (BYTES tensors arrive as bytes)."""
    try:
        text = value.decode("utf-8") if isinstance(value, bytes) else str(value)
    except UnicodeDecodeError as exc:
        raise StageError(f"TEXT_QUERY is not UTF-8 text (byte {exc.start} is invalid)") from None
    if len(text) > MAX_QUERY_CHARS:
        raise StageError(f"TEXT_QUERY has {len(text)} characters; the limit is {MAX_QUERY_CHARS}")
    return text.strip()


def request_fragments(inputs: dict[str, np.ndarray]) -> Iterator[str]:
    """One request's input tensors -> the answer's fragments (what the Triton model serves)."""
    query_tensor = inputs["TEXT_QUERY"]
    if query_tensor.size == 0:
        raise StageError("TEXT_QUERY is empty: send one UTF-8 string")
    query = decode_query(query_tensor.ravel()[0])
    return answer_fragments(query, inputs["REGION_COLOURS"], inputs["REGION_DETAIL"])


class TritonPythonModel:
    """Triton entry point; one instance per configured model instance (unary or decoupled)."""

    def initialize(self, args: dict[str, Any]) -> None:
        self.config = json.loads(args["model_config"])
        self.generator = TextGenerator(args, self.config, pb_utils, request_fragments)

    def execute(self, requests: list[Any]) -> list[Any] | None:
        return self.generator.execute(requests)

    def finalize(self) -> None:
        self.generator.finalize()
