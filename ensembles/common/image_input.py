"""Client-image checks shared by the pipelines' Python stages.

`tritonkit build` copies this file beside each stage's ``model.py`` (the spec's ``files:``), and
Triton's Python backend imports modules from that directory, so every model directory stays
self-contained: it needs only numpy and Pillow, never tritonkit. Tests import it the same way
(``ensembles/reference.py`` puts this folder on ``sys.path``).
"""

from __future__ import annotations

import io
import warnings

import numpy as np
from PIL import Image, UnidentifiedImageError

#: Decompression-bomb guard used when a stage's config sets no MAX_PIXELS parameter.
MAX_PIXELS = 40_000_000


class StageError(ValueError):
    """A request a stage refuses; the message goes back to the client as INVALID_ARGUMENT."""


def pillow_reason(exc: Exception) -> str:
    """Why Pillow refused the bytes, without its object reprs."""
    if isinstance(exc, UnidentifiedImageError):
        return "not a format Pillow reads (PNG, JPEG, GIF, BMP, TIFF, WebP, ...)"
    return f"{type(exc).__name__}: {exc}"


def decode_image(
    raw: np.ndarray, *, max_pixels: int = MAX_PIXELS, max_bytes: int | None = None
) -> Image.Image:
    """Decode encoded image bytes (a UINT8 tensor) into an RGB Pillow image.

    The byte count (``max_bytes``) is checked before anything is copied and the pixel count from
    the header before any pixel is decoded, so a decompression bomb costs no memory; anything
    Pillow cannot decode (truncated, corrupt, not an image) is a StageError.
    """
    size = int(raw.size)
    if size == 0:
        raise StageError("RAW_IMAGE is empty: send the bytes of an encoded image (PNG, JPEG, ...)")
    if max_bytes is not None and size > max_bytes:
        raise StageError(f"RAW_IMAGE is {size} bytes; the limit is {max_bytes}")
    data = np.ascontiguousarray(raw, dtype=np.uint8).tobytes()
    try:
        with warnings.catch_warnings():
            # Pillow warns (and past twice its own limit raises) on huge images: max_pixels decides
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
            if image.width * image.height > max_pixels:
                size_px = f"{image.width}x{image.height}"
                raise StageError(f"RAW_IMAGE is {size_px} pixels; the limit is {max_pixels}")
            return image.convert("RGB")  # decodes every pixel: truncated or corrupt data fails here
    except StageError:
        raise
    except Image.DecompressionBombError as exc:  # Pillow's own hard limit, checked while opening
        raise StageError(f"RAW_IMAGE has more pixels than the limit ({max_pixels}): {exc}") from exc
    except Exception as exc:  # Pillow raises many types (OSError, SyntaxError, ...) on hostile bytes
        raise StageError(
            f"RAW_IMAGE is not a readable image ({size} bytes): {pillow_reason(exc)}; "
            "send the file's bytes as UINT8, not decoded pixels"
        ) from exc
