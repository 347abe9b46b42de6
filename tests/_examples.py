"""Import the example pipelines' files (ensembles/ is not a package) by path, once per session."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def load_example(relative: str) -> Any:
    """The module at ROOT/relative, imported once and shared by every test that asks for it."""
    path = ROOT / relative
    name = "tritonkit_examples_" + "_".join(Path(relative).with_suffix("").parts)
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
