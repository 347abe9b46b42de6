"""Loading a model.py that runs inside Triton, outside Triton, for unit tests."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path
from typing import Any


def load_backend_module(path: Path, name: str) -> Any:
    """``path`` imported as ``name`` with an empty stand-in for ``triton_python_backend_utils``.

    Its siblings are imported by their plain names, as inside Triton: the Python backend stub
    appends the backend's directory to ``sys.path``, and so does this, while the module loads.
    The stand-in, the path and the siblings are only there while it loads (what was in
    ``sys.modules`` comes back), so each load gets siblings of its own that share its stand-in.
    """
    stand_in = types.ModuleType("triton_python_backend_utils")
    saved = sys.modules.get("triton_python_backend_utils")
    before = set(sys.modules)
    directory = str(path.parent)
    sys.modules["triton_python_backend_utils"] = stand_in
    sys.path.append(directory)
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(directory)
        for loaded in set(sys.modules) - before:
            if str(Path(getattr(sys.modules[loaded], "__file__", None) or "/").parent) == directory:
                del sys.modules[loaded]
        if saved is None:
            sys.modules.pop("triton_python_backend_utils", None)
        else:
            sys.modules["triton_python_backend_utils"] = saved
    return module
