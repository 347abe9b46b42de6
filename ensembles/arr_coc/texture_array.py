"""Triton Python model ``texture_array``: raw image bytes -> a 13-channel texture array.

``RAW_IMAGE`` UINT8 [-1] (an encoded image) -> ``TEXTURE`` FP32 [1, 13, 224, 224], the
per-pixel features ARR-COC's relevance scorers read. The leading 1 is a batch of one: the
scorers downstream batch requests together (dynamic batching).

Channels (see ``CHANNELS``): RGB in [0, 1]; CIELAB (L/100, a/128, b/128); luminance (Rec. 601);
Sobel x, y and magnitude of the luminance (scaled so a 0->1 step edge gives 1); local mean and
variance of the luminance over 7x7 pixels; eccentricity of the 5x5 structure tensor
(0 = isotropic or flat, 1 = a single clear orientation).

Needs only numpy, Pillow, ``triton_python_backend_utils`` and ``image_input.py`` (copied beside
this file by the spec's ``files:``); the stage is the plain function ``texture_array`` so tests
can run it without Triton.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from image_input import StageError, decode_image  # shipped beside model.py (files:)
from PIL import Image

try:
    import triton_python_backend_utils as pb_utils
except ImportError:  # imported outside Triton: tests call the stage functions directly
    pb_utils = None

SIZE = 224
CHANNELS = (
    "red", "green", "blue", "lab_l", "lab_a", "lab_b", "luminance", "sobel_x", "sobel_y",
    "sobel_magnitude", "local_mean", "local_variance", "eccentricity",
)
LOCAL_WINDOW = 7
TENSOR_WINDOW = 5


def rgb_to_lab(rgb: np.ndarray) -> np.ndarray:
    """sRGB in [0, 1], shape [..., 3] -> CIELAB (D65), shape [..., 3]."""
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    to_xyz = np.array(
        [
            [0.4124564, 0.3575761, 0.1804375],
            [0.2126729, 0.7151522, 0.0721750],
            [0.0193339, 0.1191920, 0.9503041],
        ]
    )
    xyz = linear @ to_xyz.T / np.array([0.95047, 1.0, 1.08883])
    delta = 6.0 / 29.0
    f = np.where(xyz > delta**3, np.cbrt(xyz), xyz / (3 * delta**2) + 4.0 / 29.0)
    lightness = 116.0 * f[..., 1] - 16.0
    a = 500.0 * (f[..., 0] - f[..., 1])
    b = 200.0 * (f[..., 1] - f[..., 2])
    return np.stack([lightness, a, b], axis=-1)


def box_mean(image: np.ndarray, window: int) -> np.ndarray:
    """Mean over a window x window neighbourhood (edges replicated), via an integral image."""
    pad = window // 2
    padded = np.pad(image, pad, mode="edge")
    integral = np.pad(padded.cumsum(axis=0).cumsum(axis=1), ((1, 0), (1, 0)))
    h, w = image.shape
    total = (
        integral[window : window + h, window : window + w]
        - integral[:h, window : window + w]
        - integral[window : window + h, :w]
        + integral[:h, :w]
    )
    return total / float(window * window)


def sobel(image: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sobel derivatives (x to the right, y downwards), scaled by 1/4, edges replicated."""
    p = np.pad(image, 1, mode="edge")
    smooth_rows = p[:-2] + 2.0 * p[1:-1] + p[2:]  # vertical smoothing
    smooth_cols = p[:, :-2] + 2.0 * p[:, 1:-1] + p[:, 2:]  # horizontal smoothing
    gx = (smooth_rows[:, 2:] - smooth_rows[:, :-2]) / 4.0
    gy = (smooth_cols[2:, :] - smooth_cols[:-2, :]) / 4.0
    return gx, gy


def features(rgb: np.ndarray) -> np.ndarray:
    """RGB pixels in [0, 1], [H, W, 3] -> the 13 texture channels, [13, H, W] FP32."""
    rgb = rgb.astype(np.float64)
    lab = rgb_to_lab(rgb)
    luma = rgb @ np.array([0.299, 0.587, 0.114])
    gx, gy = sobel(luma)
    magnitude = np.sqrt(gx**2 + gy**2)
    local_mean = box_mean(luma, LOCAL_WINDOW)
    local_var = np.maximum(box_mean(luma**2, LOCAL_WINDOW) - local_mean**2, 0.0)
    jxx, jyy, jxy = (box_mean(v, TENSOR_WINDOW) for v in (gx * gx, gy * gy, gx * gy))
    eccentricity = np.sqrt((jxx - jyy) ** 2 + 4.0 * jxy**2) / (jxx + jyy + 1e-6)
    channels = [
        rgb[..., 0], rgb[..., 1], rgb[..., 2],
        lab[..., 0] / 100.0, lab[..., 1] / 128.0, lab[..., 2] / 128.0,
        luma, gx, gy, magnitude, local_mean, local_var, np.clip(eccentricity, 0.0, 1.0),
    ]
    return np.stack(channels).astype(np.float32)


def texture_array(raw: np.ndarray, *, size: int = SIZE) -> np.ndarray:
    """The stage: encoded image bytes -> FP32 [1, 13, size, size]."""
    image = decode_image(raw).resize((size, size), Image.BILINEAR)
    rgb = np.asarray(image, dtype=np.float64) / 255.0
    return features(rgb)[None]


class TritonPythonModel:
    """Triton entry point; one instance per configured model instance."""

    def initialize(self, args: dict[str, Any]) -> None:
        self.config = json.loads(args["model_config"])

    def execute(self, requests: list[Any]) -> list[Any]:
        responses = []
        for request in requests:
            try:
                raw = pb_utils.get_input_tensor_by_name(request, "RAW_IMAGE").as_numpy()
                texture = texture_array(raw)
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("TEXTURE", texture)]))
            except StageError as exc:
                # bad client input: INVALID_ARGUMENT (HTTP 400), not an internal error
                error = pb_utils.TritonError(str(exc), pb_utils.TritonError.INVALID_ARG)
                responses.append(pb_utils.InferenceResponse(error=error))
        return responses
