"""ONNX generators: a spec model's ``generator: file.py:function`` run once per build for its bytes."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

from tritonkit.errors import ModelImportError, SpecError
from tritonkit.kinds.entry import ModelEntry

__all__ = ["GeneratorCache"]


class GeneratorCache:
    """Imports each generator file once per build and calls ``file.py:function``."""

    def __init__(self) -> None:
        self.modules: dict[Path, ModuleType] = {}

    def run(self, entry: ModelEntry) -> bytes:
        if entry.generator is None:
            raise SpecError(f"{entry.where}: no generator given")
        path, func_name = entry.generator
        label = f"{path}:{func_name}"
        if not path.is_file():
            raise SpecError(f"{entry.where}: generator file not found: {path}")
        module = self.modules.get(path)
        if module is None:
            module = self._import(path, entry)
            self.modules[path] = module
        func = getattr(module, func_name, None)
        if not callable(func):
            raise SpecError(f"{entry.where}: generator {label} does not exist or is not a function")
        try:
            result = func()
        except Exception as exc:
            raise ModelImportError(
                f"{entry.where}: generator {label} failed: {type(exc).__name__}: {exc}"
            ) from exc
        if isinstance(result, bytes | bytearray):
            return bytes(result)
        serialize = getattr(result, "SerializeToString", None)
        if callable(serialize):
            data = serialize()
            if isinstance(data, bytes):
                return data
        raise ModelImportError(
            f"{entry.where}: generator {label} returned {type(result).__name__}, "
            "expected an onnx.ModelProto or bytes"
        )

    @staticmethod
    def _import(path: Path, entry: ModelEntry) -> ModuleType:
        digest = hashlib.sha1(str(path).encode(), usedforsecurity=False).hexdigest()[:12]
        mod_name = f"_tritonkit_generator_{digest}"
        spec = importlib.util.spec_from_file_location(mod_name, path)
        if spec is None or spec.loader is None:
            raise SpecError(f"{entry.where}: cannot import generator file {path}")
        module = importlib.util.module_from_spec(spec)
        with _on_sys_path(path.parent):
            sys.modules[mod_name] = module
            try:
                spec.loader.exec_module(module)
            except Exception as exc:
                sys.modules.pop(mod_name, None)
                raise ModelImportError(
                    f"{entry.where}: importing generator file {path} failed: {type(exc).__name__}: {exc}"
                ) from exc
        return module


@contextmanager
def _on_sys_path(directory: Path) -> Iterator[None]:
    entry = str(directory)
    added = entry not in sys.path
    if added:
        sys.path.insert(0, entry)
    try:
        yield
    finally:
        if added and entry in sys.path:
            sys.path.remove(entry)
