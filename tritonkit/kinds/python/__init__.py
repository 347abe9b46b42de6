"""The Python kind: a ``model.py`` on Triton's Python backend, with its packed environment.

:mod:`.kind` holds the kind (:data:`PYTHON`), :mod:`.autocomplete` what the model's own
``auto_complete_config`` adds to its config before Triton checks it. Its model.py's imports are
judged against the serving image by the validator (:mod:`tritonkit.repository.validator.imports`),
which knows the images' packages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tritonkit._lazy import lazy_exports

if TYPE_CHECKING:
    from tritonkit.kinds.python.kind import PYTHON

__getattr__, __dir__ = lazy_exports(__name__, {"kind": ("PYTHON",)})

__all__ = ["PYTHON"]
