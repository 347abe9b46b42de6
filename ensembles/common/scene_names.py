"""Names for colours and places in an image, shared by the pipelines' text decoders.

``vlm/vlm_model.py`` and ``arr_coc/decoder.py`` describe images in the same words. `tritonkit
build` copies this file beside each decoder's ``model.py`` (the spec's ``files:``), where
Triton's Python backend imports it; tests import it the same way (``ensembles/reference.py``
puts this folder on ``sys.path``). Needs only numpy.
"""

from __future__ import annotations

import numpy as np


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
