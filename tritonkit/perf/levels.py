"""The load grammar `tritonkit perf` and `tritonkit tune` share: load levels and durations.

A load level is a number of concurrent requests (``mode="concurrency"``, closed loop, whole
numbers) or a request rate in requests/s (``mode="request_rate"``, open loop, fractions allowed).
Both commands write levels the same way: ``32`` (one), ``1,4,16`` (a list), ``1:64`` (doubling:
1, 2, 4, ..., 64) or ``1:64:8`` (start:end:step, linear). Durations are ``2``, ``2s``,
``500ms``, ``10m`` or ``1h``. A text that does not parse raises :class:`LoadError`, which is both
a ``PerfError`` and a ``TuneError`` so either command's callers catch it as before.
"""

from __future__ import annotations

import math
from typing import Literal

from tritonkit.errors import LoadError

LoadMode = Literal["concurrency", "request_rate"]
LOAD_MODES: tuple[LoadMode, ...] = ("concurrency", "request_rate")
#: the command-line option that writes each mode's levels
LOAD_OPTIONS: dict[str, str] = {"concurrency": "--concurrency", "request_rate": "--request-rate"}

__all__ = ["LOAD_MODES", "LOAD_OPTIONS", "LoadMode", "parse_duration", "parse_levels"]

_FORMS = "1,4,16 or {o} 1:64 (doubling) or {o} 1:64:8 (step)"


def parse_levels(text: str, *, mode: str = "concurrency", option: str | None = None) -> tuple[float, ...]:
    """``1,4,16`` (a list), ``1:64`` (doubling) or ``1:64:8`` (start:end:step, linear) -> levels.

    Concurrency levels must be whole numbers; request rates may be fractions. ``option`` names
    the flag in errors (default: the mode's own flag).
    """
    integral = mode == "concurrency"
    what = option or LOAD_OPTIONS.get(mode, "--concurrency")
    hint = f"use e.g. {what} " + _FORMS.format(o=what)

    def num(part: str) -> float:
        try:
            value = int(part) if integral else float(part)
        except ValueError:
            raise LoadError(
                f"{what} '{text}': '{part}' is not a {'whole ' if integral else ''}number", hint=hint
            ) from None
        if value <= 0 or math.isnan(value):
            raise LoadError(f"{what} '{text}': values must be positive", hint=hint)
        return float(value)

    text = text.strip()
    if ":" in text:
        parts = text.split(":")
        if len(parts) not in (2, 3):
            raise LoadError(f"{what} '{text}' is not start:end or start:end:step", hint=hint)
        start, end = num(parts[0]), num(parts[1])
        if end < start:
            raise LoadError(f"{what} '{text}': end is below start", hint=hint)
        levels = []
        if len(parts) == 3:
            step = num(parts[2])
            value = start
            while value <= end + 1e-9:
                levels.append(value)
                value += step
        else:
            value = start
            while value < end:
                levels.append(value)
                value *= 2
            levels.append(end)
        return tuple(levels)
    levels = [num(p) for p in text.split(",") if p.strip()]
    if not levels:
        raise LoadError(f"{what} is empty", hint=hint)
    return tuple(levels)


_UNITS = (("ms", 0.001), ("h", 3600.0), ("m", 60.0), ("s", 1.0))


def parse_duration(text: str, option: str) -> float:
    """``2``, ``2s``, ``500ms``, ``10m``, ``1h`` -> seconds (warm-ups, windows, budgets)."""
    raw = text.strip().lower()
    scale = 1.0
    for suffix, factor in _UNITS:
        if raw.endswith(suffix):
            raw, scale = raw[: -len(suffix)], factor
            break
    try:
        value = float(raw) * scale
    except ValueError:
        raise LoadError(
            f"{option} '{text}' is not a duration", hint=f"e.g. {option} 2s, {option} 500ms or {option} 10m"
        ) from None
    if value < 0 or math.isnan(value):
        raise LoadError(f"{option} must not be negative")
    return value
