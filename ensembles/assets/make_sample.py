"""Draws ensembles/assets/sample.png, the demo's sample image, deterministically.

A simple outdoor scene with clear answers to check the pipelines against: a blue sky over
green grass, a yellow sun in the top right, a red house with a dark roof on the left and a
white cloud in the top left. Run ``python ensembles/assets/make_sample.py`` to redraw it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

WIDTH, HEIGHT = 320, 240
HORIZON = 140
SEED = 20240611


def draw_sample() -> Image.Image:
    """The sample scene as an RGB image (same pixels on every run)."""
    rng = np.random.default_rng(SEED)
    pixels = np.zeros((HEIGHT, WIDTH, 3), dtype=np.float64)
    # Sky: deep blue at the top fading to pale blue at the horizon.
    t = np.linspace(0.0, 1.0, HORIZON)[:, None]
    top, horizon = np.array([40, 110, 220]), np.array([150, 200, 245])
    pixels[:HORIZON] = (top * (1 - t) + horizon * t)[:, None, :]
    # Grass: green with fine blade-like noise, darker towards the bottom.
    rows = HEIGHT - HORIZON
    shade = np.linspace(1.0, 0.7, rows)[:, None, None]
    noise = rng.normal(0.0, 18.0, size=(rows, WIDTH, 1))
    pixels[HORIZON:] = np.array([60, 160, 50]) * shade + noise
    image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), "RGB")

    draw = ImageDraw.Draw(image)
    draw.ellipse((238, 22, 294, 78), fill=(255, 215, 40))  # the sun
    for cx, cy, r in ((58, 42, 16), (80, 36, 20), (102, 44, 15)):  # a cloud
        draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=(250, 250, 250))
    draw.rectangle((40, 120, 120, 185), fill=(200, 40, 35))  # the house
    draw.polygon([(30, 122), (80, 85), (130, 122)], fill=(90, 50, 30))  # its roof
    draw.rectangle((70, 150, 90, 185), fill=(60, 35, 20))  # its door
    return image


def main() -> None:
    out = Path(__file__).resolve().parent / "sample.png"
    draw_sample().save(out, optimize=True)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
