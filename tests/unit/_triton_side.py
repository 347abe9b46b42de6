"""Loading a model.py that runs inside Triton, outside Triton, for unit tests."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path
from typing import Any


def load_backend_module(path: Path, name: str) -> Any:
    """``path`` imported as ``name`` with an empty stand-in for ``triton_python_backend_utils``.

    The stand-in is only there while the module loads; what was in ``sys.modules`` comes back.
    """
    stand_in = types.ModuleType("triton_python_backend_utils")
    saved = sys.modules.get("triton_python_backend_utils")
    sys.modules["triton_python_backend_utils"] = stand_in
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        if saved is None:
            sys.modules.pop("triton_python_backend_utils", None)
        else:
            sys.modules["triton_python_backend_utils"] = saved
    return module
