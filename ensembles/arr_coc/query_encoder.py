"""Triton Python model ``query_encoder``: the user's question -> a 64-dim query embedding.

``TEXT_QUERY`` BYTES [1] -> ``QUERY_EMBEDDING`` FP32 [1, 64] (a batch of one, for the batching
participatory scorer). Layout:

- dims 0-12: one weight per texture channel (see texture_array.CHANNELS), from a small lexicon
  of visual words ("red" -> +a*, "sky"/"blue" -> -b*, "bright"/"sun" -> +luminance,
  "edges"/"texture" -> +gradient and variance, ...);
- dims 13-14: position weights (x to the right, y downwards: "top" -> -y, "left" -> -x);
- dims 15-63: hashed character trigrams of the query, L2-normalised (a bag-of-n-grams text
  feature, the usual trick for a vocabulary-free encoder).

A stand-in for a learned text tower (e.g. CLIP's): replace the model behind the same tensor
names. Self-contained on purpose (numpy and ``triton_python_backend_utils`` only); the stage is
the plain function ``encode_query``.
"""

from __future__ import annotations

import json
import re
import zlib
from typing import Any

import numpy as np

try:
    import triton_python_backend_utils as pb_utils
except ImportError:  # imported outside Triton: tests call the stage functions directly
    pb_utils = None

DIM = 64
CHANNELS = 13
POS_X, POS_Y = 13, 14
NGRAM_START = 15
MAX_QUERY_CHARS = 2000
#: the largest L2 norm of the lexicon part; longer queries are scaled down to it
MAX_CONCEPT_NORM = 4.0

R, G, B, LAB_L, LAB_A, LAB_B, LUMA, SOBEL_X, SOBEL_Y, GRAD, LOCAL_MEAN, LOCAL_VAR, ECC = range(13)

#: word -> {embedding dim: weight}
LEXICON: dict[str, dict[int, float]] = {
    "red": {LAB_A: 2.0, R: 0.5},
    "green": {LAB_A: -2.0, G: 0.5},
    "grass": {LAB_A: -2.0, G: 0.5, GRAD: 0.5},
    "tree": {LAB_A: -1.5, GRAD: 0.5},
    "blue": {LAB_B: -2.0, B: 0.5},
    "sky": {LAB_B: -2.0, B: 0.5, POS_Y: -1.0},
    "water": {LAB_B: -1.5, B: 0.5},
    "yellow": {LAB_B: 2.0, LUMA: 0.5},
    "sun": {LAB_B: 2.0, LUMA: 1.0},
    "orange": {LAB_A: 1.0, LAB_B: 1.5},
    "purple": {LAB_A: 1.0, LAB_B: -1.5},
    "pink": {LAB_A: 1.5, LAB_L: 0.5},
    "brown": {LAB_A: 0.7, LAB_B: 0.7, LUMA: -1.0},
    "house": {LAB_A: 1.0, ECC: 0.5, GRAD: 0.5},
    "roof": {LAB_A: 0.7, LAB_B: 0.7, LUMA: -1.0},
    "white": {LUMA: 1.5, LAB_L: 1.0},
    "cloud": {LUMA: 1.5, LAB_L: 1.0},
    "bright": {LUMA: 2.0},
    "light": {LUMA: 1.5},
    "black": {LUMA: -2.0},
    "dark": {LUMA: -2.0},
    "shadow": {LUMA: -1.5},
    "edge": {GRAD: 2.0},
    "edges": {GRAD: 2.0},
    "texture": {GRAD: 1.0, LOCAL_VAR: 1.5},
    "detail": {GRAD: 1.5, LOCAL_VAR: 1.0},
    "busy": {GRAD: 1.0, LOCAL_VAR: 1.5},
    "smooth": {GRAD: -1.5, LOCAL_VAR: -1.0},
    "flat": {GRAD: -1.5, LOCAL_VAR: -1.0},
    "lines": {ECC: 2.0},
    "stripes": {ECC: 2.0},
    "top": {POS_Y: -2.0},
    "upper": {POS_Y: -2.0},
    "above": {POS_Y: -1.5},
    "bottom": {POS_Y: 2.0},
    "lower": {POS_Y: 2.0},
    "below": {POS_Y: 1.5},
    "ground": {POS_Y: 1.5},
    "left": {POS_X: -2.0},
    "right": {POS_X: 2.0},
}
_PLURALS = {"colours": "colour", "trees": "tree", "houses": "house", "clouds": "cloud", "roofs": "roof"}


class StageError(ValueError):
    """A request this stage cannot process; the message goes back to the client."""


def words(query: str) -> list[str]:
    """Lower-case words of the query, with a few plurals folded."""
    return [_PLURALS.get(w, w) for w in re.findall(r"[a-z]+", query.lower())]


def _trigram_slot(trigram: str) -> tuple[int, float]:
    digest = zlib.crc32(trigram.encode("utf-8"))
    return NGRAM_START + digest % (DIM - NGRAM_START), 1.0 if (digest >> 16) & 1 else -1.0


def encode_query(query: str) -> np.ndarray:
    """The stage: a question -> FP32 [64] (lexicon weights, position weights, hashed trigrams)."""
    embedding = np.zeros(DIM, dtype=np.float64)
    for word in words(query):
        for dim, weight in LEXICON.get(word, {}).items():
            embedding[dim] += weight
    concept_norm = float(np.linalg.norm(embedding[:NGRAM_START]))
    if concept_norm > MAX_CONCEPT_NORM:
        embedding[:NGRAM_START] *= MAX_CONCEPT_NORM / concept_norm
    text = f"  {' '.join(words(query))} "
    for i in range(len(text) - 2):
        slot, sign = _trigram_slot(text[i : i + 3])
        embedding[slot] += sign
    ngram_norm = float(np.linalg.norm(embedding[NGRAM_START:]))
    if ngram_norm > 0:
        embedding[NGRAM_START:] /= ngram_norm
    return embedding.astype(np.float32)


def decode_query(value: Any) -> str:
    """The TEXT_QUERY element as text (BYTES tensors arrive as bytes)."""
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
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
                tensor = pb_utils.get_input_tensor_by_name(request, "TEXT_QUERY").as_numpy()
                if tensor.size == 0:
                    raise StageError("TEXT_QUERY is empty: send one UTF-8 string")
                embedding = encode_query(decode_query(tensor.ravel()[0]))[None]
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("QUERY_EMBEDDING", embedding)]))
            except StageError as exc:
                # bad client input: INVALID_ARGUMENT (HTTP 400), not an internal error
                error = pb_utils.TritonError(str(exc), pb_utils.TritonError.INVALID_ARG)
                responses.append(pb_utils.InferenceResponse(error=error))
        return responses
