"""The Python kind object: what makes a model one, its release rows, its auto-complete."""

from __future__ import annotations

from tritonkit.kinds.base import BaseKind, BuildFacts
from tritonkit.kinds.entry import ModelKind
from tritonkit.kinds.python.autocomplete import apply_python_auto_complete
from tritonkit.kinds.releases import TARGETS

__all__ = ["PYTHON"]

PYTHON = BaseKind(
    model_kind=ModelKind.PYTHON,
    title="a Python model",
    backends=frozenset({"python"}),
    source_suffixes=frozenset({".py"}),
    build=BuildFacts(default_filename="model.py"),
    releases=TARGETS,  # the py3 image its packed environment is made for
    auto_complete=apply_python_auto_complete,  # the model's own auto_complete_config
)
