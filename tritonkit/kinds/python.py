"""The Python kind: a ``model.py`` on Triton's Python backend, with its packed environment."""

from __future__ import annotations

from tritonkit.kinds.base import BaseKind, BuildFacts
from tritonkit.kinds.entry import ModelKind
from tritonkit.kinds.releases import TARGETS
from tritonkit.repository.validator.autocomplete import apply_python_auto_complete
from tritonkit.repository.validator.imports import check_python_file

__all__ = ["PYTHON"]

PYTHON = BaseKind(
    name="python",
    model_kind=ModelKind.PYTHON,
    title="a Python model",
    backends=frozenset({"python"}),
    source_suffixes=frozenset({".py"}),
    build=BuildFacts(default_filename="model.py"),
    releases=TARGETS,  # the py3 image its packed environment is made for
    file_checks=(check_python_file,),
    auto_complete=apply_python_auto_complete,  # the model's own auto_complete_config
)
