"""What a spec's model is, as every kind reads it: ``ModelEntry``, ``ModelKind`` and the spec's line helpers.

A leaf: the spec parser, the builder and every backend kind import it, and it imports none of
them back (the ``VllmSpec`` type is named for type checkers only), so no kind needs the spec.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import yaml

from tritonkit.errors import SpecError
from tritonkit.kinds import names

if TYPE_CHECKING:  # a plain dataclass module that imports nothing of tritonkit's back
    from tritonkit.kinds.vllm.spec import VllmSpec

__all__ = [
    "CONFIG_KEYS",
    "ModelEntry",
    "ModelKind",
    "check_model_name",
    "entry_line",
    "parse_variants",
    "parse_version",
    "refuse_unknown_keys",
    "spec_line",
]

#: Keys of a model entry that shape its config.pbtxt (a variant may override any of them).
CONFIG_KEYS = frozenset(
    {
        "backend",
        "platform",
        "max_batch_size",
        "inputs",
        "outputs",
        "dynamic_batching",
        "instance_group",
        "parameters",
        "version_policy",
        "extra",
        "default_model_filename",
        "decoupled",
    }
)
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")


class ModelKind(str, enum.Enum):
    PYTHON = "python"
    ONNX = "onnx"
    ENSEMBLE = "ensemble"
    VLLM = names.VLLM  # an LLM engine stage on NVIDIA's vLLM backend (kinds/vllm)
    OTHER = "other"


@dataclass(frozen=True, kw_only=True)
class ModelEntry:
    """One model of a spec, with its file references resolved against the spec's directory."""

    name: str
    kind: ModelKind
    source: Path | None
    generator: tuple[Path, str] | None
    files: tuple[Path, ...]
    version: int
    fields: Mapping[str, Any]  # the CONFIG_KEYS given for this model
    variants: Mapping[str, Mapping[str, Any]]
    steps: tuple[Mapping[str, Any], ...]
    base: Path  # directory that relative paths (labels) are resolved against
    where: str  # "spec.yaml: model 'x'" for messages
    spec: Path | None = None  # the spec file, for line numbers (None: built without a spec)
    requirements: tuple[str, ...] = ()  # normalized PEP 508 strings (Python models only)
    target: str | None = None  # NGC tritonserver release ("24.10") the packed env is made for
    vllm: VllmSpec | None = None  # the vLLM keys of a ``backend: vllm`` stage
    bls_external: tuple[str, ...] = ()  # models its BLS calls may name that live outside the repository


def check_model_name(name: Any, *, where: str, what: str = "model name") -> str:
    """A name that is one plain directory inside the repository (no ``..``, ``/``, absolute)."""
    if not isinstance(name, str) or not name:
        raise SpecError(f"{where}: {what} must be a non-empty string, got {name!r}")
    if (
        name in (".", "..")
        or "/" in name
        or "\\" in name
        or Path(name).is_absolute()
        or not _NAME.match(name)
    ):
        raise SpecError(
            f"{where}: {what} {name!r} is not a plain directory name and could escape the repository",
            hint="use letters, digits, '_', '-' and '.', not starting with '.', without '/' or '..'",
        )
    return name


def parse_variants(raw: Any, *, where: str, spec: Path) -> Mapping[str, Mapping[str, Any]]:
    """A spec model's ``variants``: name -> the CONFIG_KEYS it overrides (each checked)."""
    variants_raw = raw or {}
    if not isinstance(variants_raw, Mapping):
        raise SpecError(f"{where}.variants must map variant names to config overrides", file=spec)
    variants: dict[str, Mapping[str, Any]] = {}
    for vname, vdata in variants_raw.items():
        check_model_name(vname, where=f"{spec}: {where}.variants", what="variant name")
        if not isinstance(vdata, Mapping):
            raise SpecError(f"{where}.variants.{vname} must be a mapping of config keys", file=spec)
        refuse_unknown_keys(
            vdata,
            CONFIG_KEYS,
            what=f"{where}.variants.{vname}: unknown key(s) ",
            spec=spec,
            allowed_label="a variant may set",
        )
        variants[vname] = MappingProxyType(dict(vdata))
    return MappingProxyType(variants)


def refuse_unknown_keys(
    raw: Mapping[str, Any],
    allowed: Collection[str],
    *,
    what: str,
    spec: Path,
    allowed_label: str = "allowed keys",
) -> None:
    """Raise a SpecError naming the keys of ``raw`` outside ``allowed`` (``what`` + their list)."""
    unknown = sorted(str(k) for k in raw if k not in allowed)
    if unknown:
        raise SpecError(
            f"{what}{', '.join(unknown)}", file=spec, hint=f"{allowed_label}: {', '.join(sorted(allowed))}"
        )


def parse_version(raw: Mapping[str, Any], *, where: str, spec: Path) -> int:
    """A spec model's ``version`` (default 1), a positive integer."""
    version = raw.get("version", 1)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise SpecError(f"{where}.version must be a positive integer, got {version!r}", file=spec)
    return version


def spec_line(spec: Path, model: str, *keys: str | int) -> int | None:
    """1-based line of ``models[<model>].<keys...>`` in the spec file (the deepest key found).

    Used to point build errors found after parsing (e.g. a declared tensor the ONNX file does
    not have) at the spec line; None when the file cannot be read back.
    """
    try:
        root = yaml.compose(spec.read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    models = _child(root, "models")
    if not isinstance(models, yaml.SequenceNode):
        return None
    node: yaml.Node | None = None
    for item in models.value:
        name = _child(item, "name")
        if isinstance(name, yaml.ScalarNode) and name.value == model:
            node = item
            break
    if node is None:
        return None
    line: int = node.start_mark.line + 1
    for key in keys:
        node = _child(node, key)
        if node is None:
            break
        line = node.start_mark.line + 1
    return line


def _child(node: yaml.Node | None, key: str | int) -> yaml.Node | None:
    if isinstance(key, int):
        if isinstance(node, yaml.SequenceNode) and 0 <= key < len(node.value):
            child: yaml.Node = node.value[key]
            return child
        return None
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key:
                value: yaml.Node = v
                return value
    return None


_WHERE_NAME = re.compile(r"^model '(?P<name>[^']+)'")


def entry_line(spec: Path, where: str, *keys: str | int) -> int | None:
    """The spec line of ``models[<name>].<keys>``, ``where`` being "model '<name>'" (a message's prefix)."""
    match = _WHERE_NAME.match(where)
    return spec_line(spec, match.group("name"), *keys) if match else None
