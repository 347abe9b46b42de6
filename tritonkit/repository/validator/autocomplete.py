"""What a Python model's ``auto_complete_config`` adds to its config before Triton checks it.

Triton runs each backend's auto-complete when it loads a model, unless the server is started
with ``--disable-auto-complete-config`` (``tritonkit validate --no-auto-complete``). For the
Python backend that is the model's own static ``auto_complete_config(auto_complete_model_config)``
(python_backend ``triton_python_backend_utils.ModelConfig``), which may, among others:

- ``set_model_transaction_policy({"decoupled": True})``: the model becomes decoupled even when
  ``config.pbtxt`` says nothing (a config's ``decoupled: false`` is the proto default and reads as
  unset; only a different value already set makes it raise);
- ``set_max_batch_size(n)``: raises ``ValueError`` (the load fails) when the config already sets
  a larger ``max_batch_size``, else sets it.

The validator reads the method with ``ast`` (never importing the model) and applies literal calls
to the config every other rule then judges, so the decoupled and batching rules see what Triton
serves. Inputs and outputs it adds are left to the rules that already allow for them.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tritonkit.repository.validator.layout import selected_versions
from tritonkit.repository.validator.report import ConfigFile, FileContext

__all__ = ["AutoCompleteSettings", "apply_python_auto_complete", "auto_complete_in", "python_auto_complete"]


@dataclass(frozen=True, kw_only=True)
class AutoCompleteSettings:
    """The literal settings a model's ``auto_complete_config`` makes (None: not set there)."""

    file: Path
    line: int
    decoupled: bool | None = None
    max_batch_size: int | None = None


def python_auto_complete(
    cf: ConfigFile, model_dir: Path, versions: Sequence[int]
) -> AutoCompleteSettings | None:
    """The ``auto_complete_config`` of the Python model file Triton loads first, if it has one."""
    if cf.config.backend != "python":
        return None
    filename = cf.config.default_model_filename or "model.py"
    for version in selected_versions(cf.config, versions):
        path = model_dir / str(version) / filename
        try:
            source = path.read_bytes()
            if b"auto_complete_config" not in source:
                continue
            tree = ast.parse(source, filename=str(path))
        except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
            continue  # the model-file check reports an unreadable model.py
        found = auto_complete_in(tree, path)
        if found is not None:
            return found
    return None


def auto_complete_in(tree: ast.Module, path: Path) -> AutoCompleteSettings | None:
    """The literal settings of ``TritonPythonModel.auto_complete_config`` in one parsed file."""
    for node in tree.body:
        if not (isinstance(node, ast.ClassDef) and node.name == "TritonPythonModel"):
            continue
        for fn in node.body:
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) and fn.name == "auto_complete_config":
                return _settings(fn, path)
    return None


def _settings(fn: ast.FunctionDef | ast.AsyncFunctionDef, path: Path) -> AutoCompleteSettings:
    decoupled: bool | None = None
    max_batch_size: int | None = None
    for node in ast.walk(fn):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args):
            continue
        if node.func.attr == "set_model_transaction_policy":
            value = _policy_decoupled(node.args[0])
            if value is not None:
                decoupled = value
        elif node.func.attr == "set_max_batch_size":
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and type(arg.value) is int:
                max_batch_size = arg.value
    return AutoCompleteSettings(file=path, line=fn.lineno, decoupled=decoupled, max_batch_size=max_batch_size)


def _policy_decoupled(arg: ast.expr) -> bool | None:
    """``{"decoupled": X}`` or ``dict(decoupled=X)`` with a literal bool X."""
    value: ast.expr | None = None
    if isinstance(arg, ast.Dict):
        for key, item in zip(arg.keys, arg.values, strict=True):
            if isinstance(key, ast.Constant) and key.value == "decoupled":
                value = item
    elif isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name) and arg.func.id == "dict":
        value = next((kw.value for kw in arg.keywords if kw.arg == "decoupled"), None)
    if isinstance(value, ast.Constant) and isinstance(value.value, bool):
        return value.value
    return None


def apply_python_auto_complete(cf: ConfigFile, context: FileContext) -> None:
    """Make ``cf.config`` what the model's ``auto_complete_config`` leaves Triton to judge, and
    report what makes that method raise (the load then fails). The Python kind's auto-complete."""
    found = python_auto_complete(cf, context.model_dir, context.versions)
    if found is None:
        return
    where = f"{found.file.name}:{found.line}"
    if found.decoupled:
        # the decoupled-model note (decoupled_rules) then says how to call it
        cf.config.model_transaction_policy.decoupled = True
    if found.max_batch_size is not None:
        if cf.config.max_batch_size > found.max_batch_size:
            cf.error(
                "auto-complete-conflict",
                f"max_batch_size {cf.config.max_batch_size} is larger than the "
                f"{found.max_batch_size} that auto_complete_config ({where}) sets: the Python "
                "backend raises ValueError and Triton fails the load. Set max_batch_size to "
                f"{found.max_batch_size} or less",
                at="max_batch_size",
            )
        else:
            cf.config.max_batch_size = found.max_batch_size
