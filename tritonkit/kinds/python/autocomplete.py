"""What a Python model's ``auto_complete_config`` adds to its config before Triton checks it.

Triton runs each backend's auto-complete when it loads a model, unless the server is started
with ``--disable-auto-complete-config`` (``tritonkit validate --no-auto-complete``). For the
Python backend that is the model's own static ``auto_complete_config(auto_complete_model_config)``
(python_backend ``triton_python_backend_utils.ModelConfig``), which may, among others:

- ``set_model_transaction_policy({"decoupled": True})``: the model becomes decoupled when
  ``config.pbtxt`` has no ``model_transaction_policy`` block; a block, even ``{}`` or
  ``decoupled: false``, reaches the backend with its ``decoupled`` value, and a different value
  makes the call raise (served on 2.51: Triton's QA case ``model_transaction_policy_mismatch``);
- ``set_max_batch_size(n)``: raises ``ValueError`` (the load fails) when the config already sets
  a larger ``max_batch_size``, else sets it;
- ``add_input``/``add_output({...})``: raises for a tensor without ``name``, ``data_type`` or
  ``dims``, with another key (``optional`` is an input's only extra), or whose data type or dims
  differ from what the config already gives that tensor; else fills in what the config left out;
- ``set_dynamic_batching()``: raises when the config has ``sequence_batching``;
- and the method must return the config object: Triton refuses a model whose method returns
  nothing.

The validator (through the Python kind) reads the method with ``ast`` (never importing the
model) and applies literal calls (a dict literal, or a name bound once to one, for the tensors) to
the config every other rule then judges, so the decoupled, batching and tensor rules see what
Triton serves. Each refusal is checked against Triton's own QA cases (server
``qa/L0_model_config/autofill_noplatform/python``).
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritonkit._python_source import parse_source
from tritonkit.kinds.rules import ConfigFile, FileContext, selected_versions

__all__ = ["AutoCompleteSettings", "apply_python_auto_complete", "auto_complete_in", "python_auto_complete"]


@dataclass(frozen=True, kw_only=True)
class AutoCompleteSettings:
    """The literal settings a model's ``auto_complete_config`` makes (None: not set there)."""

    file: Path
    line: int
    decoupled: bool | None = None
    max_batch_size: int | None = None
    #: keys of a literal ``set_model_transaction_policy`` dict (None: no such call)
    policy_keys: tuple[str, ...] | None = None
    #: ("input" | "output", the literal dict) for each ``add_input``/``add_output`` it can read
    tensors: tuple[tuple[str, dict[str, Any]], ...] = ()
    dynamic_batching: bool = False
    returns: bool = True


def python_auto_complete(
    cf: ConfigFile, model_dir: Path, versions: Sequence[int]
) -> AutoCompleteSettings | None:
    """The ``auto_complete_config`` of the Python model file Triton loads first, if it has one."""
    if cf.config.backend != "python" and (cf.config.backend or cf.config.platform):
        return None  # a config naming neither is the Python backend's when model.py is there
    filename = cf.config.default_model_filename or "model.py"
    for version in selected_versions(cf.config, versions):
        path = model_dir / str(version) / filename
        try:
            source = path.read_bytes()
            if b"auto_complete_config" not in source:
                continue
            tree = parse_source(source, str(path))
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
    policy_keys: tuple[str, ...] | None = None
    tensors: list[tuple[str, dict[str, Any]]] = []
    dynamic_batching = False
    bound = _dicts_bound_once(fn)
    for node in ast.walk(fn):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        attr, arg = node.func.attr, node.args[0] if node.args else None
        if attr == "set_dynamic_batching":
            dynamic_batching = True
        elif arg is None:
            continue
        elif attr == "set_model_transaction_policy":
            policy = _literal_dict(arg, bound)
            policy_keys = tuple(policy) if policy is not None else None
            value = _policy_decoupled(arg)
            if value is not None:
                decoupled = value
        elif attr == "set_max_batch_size":
            if isinstance(arg, ast.Constant) and type(arg.value) is int:
                max_batch_size = arg.value
        elif attr in ("add_input", "add_output"):
            tensor = _literal_dict(arg, bound)
            if tensor is not None:
                tensors.append((attr[4:], tensor))
    returns = any(isinstance(n, ast.Return) and n.value is not None for n in ast.walk(fn))
    return AutoCompleteSettings(
        file=path,
        line=fn.lineno,
        decoupled=decoupled,
        max_batch_size=max_batch_size,
        policy_keys=policy_keys,
        tensors=tuple(tensors),
        dynamic_batching=dynamic_batching,
        returns=returns,
    )


def _dicts_bound_once(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, ast.Dict]:
    """Names the method binds exactly once, to a dict literal (``input0 = {...}``)."""
    seen: dict[str, list[ast.expr]] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            seen.setdefault(node.targets[0].id, []).append(node.value)
    return {
        name: values[0]
        for name, values in seen.items()
        if len(values) == 1 and isinstance(values[0], ast.Dict)
    }


def _literal_dict(arg: ast.expr, bound: dict[str, ast.Dict]) -> dict[str, Any] | None:
    """The value of a dict literal (or a name bound to one) whose keys are strings; None when
    any part is not a literal."""
    node = bound.get(arg.id) if isinstance(arg, ast.Name) else arg
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "dict"
        and not node.args
    ):
        node = ast.Dict(
            keys=[ast.Constant(k.arg) for k in node.keywords], values=[k.value for k in node.keywords]
        )
    if not isinstance(node, ast.Dict) or any(k is None for k in node.keys):
        return None
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError):
        return None
    return value if all(isinstance(k, str) for k in value) else None


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
    policy = cf.config.model_transaction_policy
    if found.decoupled is not None and cf.config.HasField("model_transaction_policy"):
        if policy.decoupled != found.decoupled:
            cf.error(
                "auto-complete-conflict",
                f"model_transaction_policy says decoupled {str(policy.decoupled).lower()} (a block "
                f"without the field reads false), but auto_complete_config ({where}) sets decoupled "
                f"{str(found.decoupled).lower()}: the Python backend raises ValueError and Triton "
                "fails the load. Remove the block from the config or make the two agree",
                at="model_transaction_policy",
            )
    elif found.decoupled:
        # the decoupled-model note (decoupled_rules) then says how to call it
        policy.decoupled = True
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
    _other_calls(cf, found, where)
    for kind, tensor in found.tensors:
        _add_tensor(cf, kind, tensor, where)


def _other_calls(cf: ConfigFile, found: AutoCompleteSettings, where: str) -> None:
    """The return value, the transaction policy's keys and ``set_dynamic_batching``."""
    refused = "the Python backend raises and Triton fails the load"
    if not found.returns:
        cf.error(
            "auto-complete-invalid",
            f"auto_complete_config ({where}) returns nothing: it must return the config object it "
            f"was given, or {refused}",
        )
    if found.policy_keys is not None and set(found.policy_keys) - {"decoupled"}:
        cf.error(
            "auto-complete-invalid",
            f"auto_complete_config ({where}) passes set_model_transaction_policy the keys "
            f"{sorted(found.policy_keys)}; 'decoupled' is the only one allowed, else {refused}",
        )
    if found.dynamic_batching:
        if cf.config.HasField("sequence_batching"):
            cf.error(
                "auto-complete-conflict",
                f"auto_complete_config ({where}) calls set_dynamic_batching() but the config sets "
                f"sequence_batching: {refused}. Drop one of the two",
                at="sequence_batching",
            )
        else:
            cf.config.dynamic_batching.SetInParent()


#: the keys ``add_input`` / ``add_output`` take (python_backend ``ModelConfig``)
_TENSOR_KEYS = {"input": {"name", "data_type", "dims", "optional"}, "output": {"name", "data_type", "dims"}}


def _add_tensor(cf: ConfigFile, kind: str, tensor: dict[str, Any], where: str) -> None:
    """One ``add_input``/``add_output``: refused as the Python backend refuses it, else merged into
    the config as the backend merges it (missing fields filled, a new tensor appended)."""
    refused = "the Python backend raises and Triton fails the load"
    label = f"{kind} '{tensor['name']}'" if "name" in tensor else f"an {kind}"
    missing = [key for key in ("name", "data_type", "dims") if key not in tensor]
    extra = sorted(set(tensor) - _TENSOR_KEYS[kind])
    if missing or extra:
        what = f"lacks {', '.join(missing)}" if missing else f"has the key(s) {extra}"
        allowed = ", ".join(sorted(_TENSOR_KEYS[kind]))
        cf.error(
            "auto-complete-invalid",
            f"auto_complete_config ({where}) adds {label} that {what} (it takes {allowed}): {refused}",
        )
        return
    tensors = cf.config.input if kind == "input" else cf.config.output
    declared = next((t for t in tensors if t.name == tensor["name"]), None)
    if declared is None:  # the backend appends a tensor the config does not declare
        declared = tensors.add()
        declared.name = tensor["name"]
    enum = declared.DESCRIPTOR.fields_by_name["data_type"].enum_type
    config_type = enum.values_by_number[declared.data_type].name
    if config_type != "TYPE_INVALID" and config_type != tensor["data_type"]:
        cf.error(
            "auto-complete-conflict",
            f"{label} is {config_type} in the config but auto_complete_config ({where}) adds it as "
            f"{tensor['data_type']}: {refused}. Make the two agree",
            at=f"{kind}[{list(tensors).index(declared)}].data_type",
        )
    elif list(declared.dims) and list(declared.dims) != list(tensor["dims"]):
        cf.error(
            "auto-complete-conflict",
            f"{label} has dims {list(declared.dims)} in the config but auto_complete_config ({where}) "
            f"adds it with dims {list(tensor['dims'])}: {refused}. Make the two agree",
            at=f"{kind}[{list(tensors).index(declared)}].dims",
        )
    else:
        if config_type == "TYPE_INVALID" and tensor["data_type"] in enum.values_by_name:
            declared.data_type = enum.values_by_name[tensor["data_type"]].number
        if not declared.dims:
            declared.dims.extend(int(d) for d in tensor["dims"])
        if kind == "input" and tensor.get("optional") is True:
            declared.optional = True
