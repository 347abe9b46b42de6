"""Pipeline specs (YAML): which models a repository holds, where their files come from, wiring.

Format (paths are relative to the spec file)::

    name: vlm
    target: "24.10"                      # default for every model (see pyenv.TARGETS)
    requirements: [pillow>=10]           # added to every Python model's own requirements
    models:
      - name: image_preprocessor
        backend: python                  # or platform: onnxruntime_onnx / ensemble / any backend
        source: vlm/image_preprocessor.py  # OR generator: vlm/models.py:make_encoder
        files: [vlm/vocab.json]
        version: 1
        max_batch_size: 8
        inputs:  [{name: RAW_IMAGE, data_type: UINT8, dims: [-1]}]
        outputs: [{name: PIXELS, data_type: FP32, dims: [3, 224, 224], labels: labels.txt}]
        dynamic_batching: {preferred_batch_size: [4, 8], max_queue_delay_microseconds: 500}
        instance_group: [{kind: KIND_GPU, count: 1}]
        parameters: {KEY: value}
        decoupled: true                  # model_transaction_policy: 0..n responses per request
        version_policy: {latest: {num_versions: 1}}
        extra: {optimization: {...}}     # any other ModelConfig field, protobuf JSON form
        variants: {cpu: {instance_group: [{kind: KIND_CPU, count: 2}]}}
        requirements: [pillow>=10]       # Python models: packed into EXECUTION_ENV_PATH
        target: "24.10"                  # NGC tritonserver release the archive is made for
      - name: decoder
        backend: vllm                    # an LLM engine stage: see vllm_stage.py
        model: tiny_llm/                 # local Hugging Face dir (packed) or a hub id
        engine: {max_model_len: 512}     # vLLM engine arguments -> 1/model.json, as given
      - name: vlm_ensemble
        platform: ensemble
        steps: [{model: image_preprocessor, version: -1, inputs: {A: A}, outputs: {B: b}}]
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from tritonkit.errors import SpecError
from tritonkit.repository.pyenv import normalize_requirements, resolve_target
from tritonkit.repository.vllm_releases import resolve_vllm_target
from tritonkit.repository.vllm_stage import BACKEND as VLLM_BACKEND
from tritonkit.repository.vllm_stage import VLLM_KEYS, VllmStage, parse_vllm_stage

__all__ = [
    "CONFIG_KEYS",
    "ModelEntry",
    "ModelKind",
    "PipelineSpec",
    "check_model_name",
    "load_spec",
    "parse_spec",
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
_MODEL_KEYS = CONFIG_KEYS | VLLM_KEYS | {
    "name", "source", "generator", "files", "version", "variants", "steps", "requirements", "target",
}  # fmt: skip
_TOP_KEYS = ("name", "models", "description", "requirements", "target")
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")


class ModelKind(str, enum.Enum):
    PYTHON = "python"
    ONNX = "onnx"
    ENSEMBLE = "ensemble"
    VLLM = "vllm"  # an LLM engine stage on NVIDIA's vLLM backend (vllm_stage.py)
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
    vllm: VllmStage | None = None  # the vLLM keys of a ``backend: vllm`` stage


@dataclass(frozen=True, kw_only=True)
class PipelineSpec:
    name: str
    path: Path
    models: tuple[ModelEntry, ...]


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


def load_spec(path: str | Path) -> PipelineSpec:
    """Read and check a pipeline spec; SpecError names the file and the model at fault."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise SpecError("spec file does not exist", file=p) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"cannot read spec file: {exc}", file=p) from exc
    try:
        # libyaml's loader where PyYAML has it: a 1,000-model spec loads 10x faster.
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecError(f"not valid YAML: {problem}", file=p, line=line) from exc
    return parse_spec(data, path=p)


def parse_spec(data: Any, *, path: Path) -> PipelineSpec:
    if not isinstance(data, Mapping):
        raise SpecError("a spec must be a mapping with 'name' and 'models'", file=path)
    unknown = sorted(str(k) for k in data if k not in _TOP_KEYS)
    if unknown:
        raise SpecError(
            f"unknown top-level key(s): {', '.join(unknown)}",
            file=path,
            hint=f"allowed keys: {', '.join(sorted(_TOP_KEYS))}",
        )
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise SpecError("missing 'name' (the spec name the repository remembers)", file=path)
    models_raw = data.get("models")
    if not isinstance(models_raw, list) or not models_raw:
        raise SpecError("'models' must be a non-empty list", file=path)
    base = path.parent
    shared = _Shared.parse(data, spec=path)
    models: list[ModelEntry] = []
    seen: set[str] = set()
    for i, raw in enumerate(models_raw):
        entry = _model_entry(raw, index=i, base=base, spec=path, shared=shared)
        if entry.name in seen:
            raise SpecError(f"model '{entry.name}' is listed twice", file=path)
        seen.add(entry.name)
        models.append(entry)
    return PipelineSpec(name=name.strip(), path=path, models=tuple(models))


@dataclass(frozen=True)
class _Shared:
    """Spec-level ``requirements`` and ``target``, which every Python model inherits."""

    requirements: tuple[str, ...]
    target: str | None

    @classmethod
    def parse(cls, data: Mapping[str, Any], *, spec: Path) -> _Shared:
        reqs = _requirements(data.get("requirements"), where=f"{spec}: requirements")
        target = data.get("target")
        if target is not None:
            target = resolve_target(target, where=f"{spec}: target").release
        return cls(reqs, target)


def _requirements(raw: Any, *, where: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    return normalize_requirements(raw, where=where)


def _python_env(
    raw: Mapping[str, Any], kind: ModelKind, shared: _Shared, *, where: str, spec: Path
) -> tuple[tuple[str, ...], str | None]:
    own = _requirements(raw.get("requirements"), where=f"{spec}: {where}.requirements")
    target = raw.get("target")
    if (own or target is not None) and kind is not ModelKind.PYTHON:
        raise SpecError(
            f"{where}: 'requirements' and 'target' are only for Python-backend models",
            file=spec,
            hint="list the packages on the Python model that imports them",
        )
    if kind is not ModelKind.PYTHON:
        return (), None
    release = resolve_target(target, where=f"{spec}: {where}.target").release if target else shared.target
    reqs = own + shared.requirements
    if reqs:
        reqs = normalize_requirements(list(reqs), where=f"{spec}: {where}.requirements")
    return reqs, release


def _model_entry(raw: Any, *, index: int, base: Path, spec: Path, shared: _Shared) -> ModelEntry:
    where = f"models[{index}]"
    if not isinstance(raw, Mapping):
        raise SpecError(f"{where} must be a mapping", file=spec)
    name = check_model_name(raw.get("name"), where=f"{spec}: {where}")
    where = f"model '{name}'"
    unknown = sorted(str(k) for k in raw if k not in _MODEL_KEYS)
    if unknown:
        raise SpecError(
            f"{where}: unknown key(s) {', '.join(unknown)}",
            file=spec,
            hint=f"allowed keys: {', '.join(sorted(_MODEL_KEYS))}",
        )
    if raw.get("backend") == VLLM_BACKEND:
        return _vllm_entry(raw, name=name, base=base, where=where, spec=spec, shared=shared)
    given = sorted(k for k in VLLM_KEYS if k in raw)
    if given:
        raise SpecError(f"{where}: {', '.join(given)} only apply to a vLLM stage (backend: vllm)", file=spec)
    source = _path(raw.get("source"), base=base, where=f"{where}.source", spec=spec)
    generator = _generator(raw.get("generator"), base=base, where=where, spec=spec)
    if source is not None and generator is not None:
        raise SpecError(f"{where}: give either source or generator, not both", file=spec)
    files_raw = raw.get("files", [])
    if not isinstance(files_raw, list):
        raise SpecError(f"{where}.files must be a list of paths", file=spec)
    files = tuple(_path(f, base=base, where=f"{where}.files", spec=spec) or base for f in files_raw)
    version = raw.get("version", 1)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise SpecError(f"{where}.version must be a positive integer, got {version!r}", file=spec)
    fields = {k: raw[k] for k in CONFIG_KEYS if k in raw}
    kind = _kind(fields, source, generator)
    steps_raw = raw.get("steps", [])
    if not isinstance(steps_raw, list):
        raise SpecError(f"{where}.steps must be a list", file=spec)
    _check_kind(
        kind, source=source, generator=generator, files=files, steps=steps_raw, where=where, spec=spec
    )
    variants = _variants(raw.get("variants"), where=where, spec=spec)
    requirements, target = _python_env(raw, kind, shared, where=where, spec=spec)
    return ModelEntry(
        name=name,
        kind=kind,
        source=source,
        generator=generator,
        files=files,
        version=version,
        fields=MappingProxyType(fields),
        variants=variants,
        steps=tuple(steps_raw),
        base=base,
        where=f"{spec}: {where}",
        spec=spec,
        requirements=requirements,
        target=target,
    )


def _vllm_entry(
    raw: Mapping[str, Any], *, name: str, base: Path, where: str, spec: Path, shared: _Shared
) -> ModelEntry:
    stage = parse_vllm_stage(raw, base=base, where=where, spec=spec)
    version = raw.get("version", 1)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise SpecError(f"{where}.version must be a positive integer, got {version!r}", file=spec)
    fields = {k: raw[k] for k in CONFIG_KEYS if k in raw}
    target = raw.get("target")
    release = resolve_vllm_target(target, where=f"{spec}: {where}.target") if target else shared.target
    return ModelEntry(
        name=name,
        kind=ModelKind.VLLM,
        source=None,
        generator=None,
        files=(),
        version=version,
        fields=MappingProxyType(fields),
        variants=_variants(raw.get("variants"), where=where, spec=spec),
        steps=(),
        base=base,
        where=f"{spec}: {where}",
        spec=spec,
        target=release,
        vllm=stage,
    )


def _generator(gen: Any, *, base: Path, where: str, spec: Path) -> tuple[Path, str] | None:
    if gen is None:
        return None
    if not isinstance(gen, str) or ":" not in gen:
        raise SpecError(f"{where}.generator must be 'file.py:function', got {gen!r}", file=spec)
    file_part, func = gen.rsplit(":", 1)
    gen_path = _path(file_part, base=base, where=f"{where}.generator", spec=spec)
    if gen_path is None or not func.isidentifier():
        raise SpecError(f"{where}.generator must be 'file.py:function', got {gen!r}", file=spec)
    return gen_path, func


def _check_kind(
    kind: ModelKind,
    *,
    source: Path | None,
    generator: tuple[Path, str] | None,
    files: tuple[Path, ...],
    steps: list[Any],
    where: str,
    spec: Path,
) -> None:
    if steps and kind is not ModelKind.ENSEMBLE:
        raise SpecError(f"{where}: 'steps' is only for platform: ensemble", file=spec)
    if kind is ModelKind.ENSEMBLE:
        if source is not None or generator is not None or files:
            raise SpecError(f"{where}: an ensemble has no source, generator or files", file=spec)
        if not steps:
            raise SpecError(f"{where}: an ensemble needs 'steps'", file=spec)
    elif source is None and generator is None:
        raise SpecError(f"{where}: needs a 'source' file or a 'generator' (file.py:function)", file=spec)


def _variants(raw: Any, *, where: str, spec: Path) -> Mapping[str, Mapping[str, Any]]:
    variants_raw = raw or {}
    if not isinstance(variants_raw, Mapping):
        raise SpecError(f"{where}.variants must map variant names to config overrides", file=spec)
    variants: dict[str, Mapping[str, Any]] = {}
    for vname, vdata in variants_raw.items():
        check_model_name(vname, where=f"{spec}: {where}.variants", what="variant name")
        if not isinstance(vdata, Mapping):
            raise SpecError(f"{where}.variants.{vname} must be a mapping of config keys", file=spec)
        bad = sorted(str(k) for k in vdata if k not in CONFIG_KEYS)
        if bad:
            raise SpecError(
                f"{where}.variants.{vname}: unknown key(s) {', '.join(bad)}",
                file=spec,
                hint=f"a variant may set: {', '.join(sorted(CONFIG_KEYS))}",
            )
        variants[vname] = MappingProxyType(dict(vdata))
    return MappingProxyType(variants)


def _kind(fields: Mapping[str, Any], source: Path | None, generator: tuple[Path, str] | None) -> ModelKind:
    platform = str(fields.get("platform", "") or "")
    backend = str(fields.get("backend", "") or "")
    if platform == "ensemble":
        return ModelKind.ENSEMBLE
    if backend == "python":
        return ModelKind.PYTHON
    if backend == "onnxruntime" or platform == "onnxruntime_onnx" or generator is not None:
        return ModelKind.ONNX
    if not backend and not platform and source is not None:
        if source.suffix == ".py":
            return ModelKind.PYTHON
        if source.suffix == ".onnx":
            return ModelKind.ONNX
    return ModelKind.OTHER


def _path(value: Any, *, base: Path, where: str, spec: Path) -> Path | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise SpecError(f"{where} must be a path string, got {value!r}", file=spec)
    return (base / value).resolve() if not Path(value).is_absolute() else Path(value)


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
