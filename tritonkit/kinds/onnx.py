"""The ONNX kind: a graph file (or a generator that writes one) on the ONNX Runtime backend."""

from __future__ import annotations

from tritonkit.kinds.base import BaseKind, BuildFacts
from tritonkit.kinds.entry import ModelKind

__all__ = ["ONNX"]

ONNX = BaseKind(
    model_kind=ModelKind.ONNX,
    title="an ONNX model",
    backends=frozenset({"onnxruntime"}),
    platforms=frozenset({"onnxruntime_onnx"}),
    source_suffixes=frozenset({".onnx"}),
    build=BuildFacts(default_filename="model.onnx"),
)
