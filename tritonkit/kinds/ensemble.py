"""The ensemble kind: a pipeline of other models' steps, with no files of its own."""

from __future__ import annotations

from tritonkit.kinds.base import BaseKind
from tritonkit.kinds.entry import ModelKind

__all__ = ["ENSEMBLE"]

ENSEMBLE = BaseKind(
    model_kind=ModelKind.ENSEMBLE,
    title="an ensemble",
    platforms=frozenset({"ensemble"}),
)
