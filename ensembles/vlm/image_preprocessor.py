"""Triton Python model ``image_preprocessor``: raw encoded image bytes -> normalised pixels.

Decodes any format Pillow reads (PNG, JPEG, ...), converts to RGB, resizes to 224x224
(bilinear) and normalises with the ImageNet mean/std into FP32 [3, 224, 224] (CHW), the
layout ImageNet-trained encoders expect.

Self-contained on purpose: the repository ships to servers where tritonkit is not installed,
so this file needs only numpy, Pillow, Triton's ``triton_python_backend_utils`` and
``image_input.py`` (the image checks shared with ARR-COC's stages, copied beside this file by
the spec's ``files:``). The stage itself is the plain function ``preprocess`` so tests can run
it without Triton.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from image_input import MAX_PIXELS, StageError, decode_image  # shipped beside model.py (files:)
from PIL import Image

try:
    import triton_python_backend_utils as pb_utils
except ImportError:  # imported outside Triton: tests call the stage functions directly
    pb_utils = None

SIZE = 224
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def preprocess(raw: np.ndarray, *, size: int = SIZE, max_pixels: int = MAX_PIXELS) -> np.ndarray:
    """The stage: encoded image bytes -> FP32 [3, size, size], ImageNet-normalised."""
    image = decode_image(raw, max_pixels=max_pixels).resize((size, size), Image.BILINEAR)
    pixels = np.asarray(image, dtype=np.float32) / 255.0
    normalised = (pixels - MEAN) / STD
    return np.ascontiguousarray(normalised.transpose(2, 0, 1), dtype=np.float32)


class TritonPythonModel:
    """Triton entry point; one instance per configured model instance."""

    def initialize(self, args: dict[str, Any]) -> None:
        config = json.loads(args["model_config"])
        self.output_name = config["output"][0]["name"]
        raw_limit = config.get("parameters", {}).get("MAX_PIXELS", {}).get("string_value", "")
        try:
            self.max_pixels = int(raw_limit) if raw_limit else MAX_PIXELS
        except ValueError:
            raise pb_utils.TritonModelException(
                f"image_preprocessor: parameter MAX_PIXELS must be an int, got {raw_limit!r}"
            ) from None

    def execute(self, requests: list[Any]) -> list[Any]:
        responses = []
        for request in requests:
            try:
                raw = pb_utils.get_input_tensor_by_name(request, "RAW_IMAGE").as_numpy()
                pixels = preprocess(raw, max_pixels=self.max_pixels)
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor(self.output_name, pixels)]))
            except StageError as exc:
                # bad client input: INVALID_ARGUMENT (HTTP 400), not an internal error
                error = pb_utils.TritonError(str(exc), pb_utils.TritonError.INVALID_ARG)
                responses.append(pb_utils.InferenceResponse(error=error))
        return responses
