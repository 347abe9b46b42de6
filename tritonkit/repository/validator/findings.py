"""One cross-check of a config against its model file, and the shape wording the rules share."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tritonkit.repository.validator.report import Severity

__all__ = ["Finding", "config_shape", "shape_text"]


@dataclass(frozen=True, kw_only=True)
class Finding:
    """One cross-check result; ``at`` is a config field path (its line), or None."""

    severity: Severity
    code: str
    message: str
    at: str | None = None


def shape_text(values: Iterable[int]) -> str:
    """``[1, -1, 3]``: a shape as the messages write it."""
    return "[" + ", ".join(str(d) for d in values) + "]"


def config_shape(t: Any) -> tuple[tuple[int, ...], str]:
    """The shape a config tensor declares (``reshape`` if given, else ``dims``) and that field's name."""
    if t.HasField("reshape"):
        return tuple(t.reshape.shape), "reshape"
    return tuple(t.dims), "dims"
