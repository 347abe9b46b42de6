"""The registry of backend kinds: look a kind up by spec model, by config, by entry; list them.

The order of :data:`KINDS` is the order of precedence when a config names both a platform and a
backend of different kinds (``platform: ensemble`` wins, then the LLM kinds, Python, ONNX) and the
order the validator runs the kinds' checks in. A new backend is one module and one line here.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tritonkit.kinds.base import BackendKind
from tritonkit.kinds.ensemble import ENSEMBLE
from tritonkit.kinds.entry import ModelEntry, ModelKind
from tritonkit.kinds.onnx import ONNX
from tritonkit.kinds.python.kind import PYTHON
from tritonkit.kinds.tensorrtllm.kind import TENSORRTLLM
from tritonkit.kinds.vllm.kind import VLLM

__all__ = [
    "KINDS",
    "all_kinds",
    "kind_for",
    "kind_for_config",
    "kind_for_source",
    "kind_for_spec",
    "kind_named",
    "kind_of_entry",
    "spec_keys",
]

KINDS: tuple[BackendKind, ...] = (ENSEMBLE, TENSORRTLLM, VLLM, PYTHON, ONNX)


def all_kinds() -> tuple[BackendKind, ...]:
    return KINDS


def kind_named(name: str) -> BackendKind | None:
    """The kind called ``name`` ("onnx", "python", "ensemble", "vllm", "tensorrtllm")."""
    return next((k for k in KINDS if k.name == name), None)


def kind_for(*, backend: str = "", platform: str = "") -> BackendKind | None:
    """The kind a config with this ``backend`` / ``platform`` is (None: a backend no kind knows)."""
    return next((k for k in KINDS if k.answers_for(backend=backend, platform=platform)), None)


def kind_for_config(config: Any) -> BackendKind | None:
    """The kind of a parsed config (a ``ModelConfig``: its ``backend`` and ``platform``)."""
    return kind_for(backend=str(config.backend or ""), platform=str(config.platform or ""))


def kind_for_source(source: Path) -> BackendKind | None:
    """The kind a model file's suffix makes a spec model that names no backend or platform."""
    return next((k for k in KINDS if source.suffix in k.source_suffixes), None)


def kind_for_spec(raw: Mapping[str, Any]) -> BackendKind | None:
    """The kind that parses or expands the spec model ``raw`` itself (None: the spec's common parse)."""
    return next((k for k in KINDS if k.describes(raw)), None)


def kind_of_entry(entry: ModelEntry) -> BackendKind | None:
    """The kind of a parsed spec model."""
    if entry.kind is not ModelKind.OTHER:
        return next((k for k in KINDS if k.model_kind is entry.kind), None)
    fields = entry.fields
    return kind_for(
        backend=str(fields.get("backend", "") or ""), platform=str(fields.get("platform", "") or "")
    )


def spec_keys() -> dict[str, BackendKind]:
    """Spec key -> the kind that alone takes it (beside the keys every model has)."""
    return {key: k for k in KINDS for key in sorted(k.spec_keys)}
