"""Pipeline specs (YAML): which models a repository holds, where their files come from, wiring.

Format (paths are relative to the spec file)::

    name: vlm
    target: "24.10"                      # default for every model (see execution_env.TARGETS)
    image: {name: myacr.azurecr.io/triton-torch:24.10, python: "3.10", packages: freeze.txt}
                                         # OR a custom image (see repository/custom_image.py)
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
        backend: vllm                    # an LLM engine stage: see tritonkit/kinds/vllm
        model: tiny_llm/                 # local Hugging Face dir (packed) or a hub id
        engine: {max_model_len: 512}     # vLLM engine arguments -> 1/model.json, as given
        bls_external: [reranker]         # Python models: BLS callees served from another repository
        openai: {text_input: Q, text_output: A}  # pipelines: the OpenAI front's mapping (parameters)
      - name: vlm_ensemble
        platform: ensemble
        steps: [{model: image_preprocessor, version: -1, inputs: {A: A}, outputs: {B: b}}]
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from tritonkit.errors import SpecError
from tritonkit.kinds import registry
from tritonkit.kinds.base import SpecContext
from tritonkit.kinds.entry import (
    CONFIG_KEYS,
    ModelEntry,
    ModelKind,
    check_model_name,
    parse_variants,
    parse_version,
    refuse_unknown_keys,
)
from tritonkit.openai_key import openai_parameters
from tritonkit.repository.custom_image import CustomImage, parse_image
from tritonkit.repository.execution_env import normalize_requirements, resolve_target
from tritonkit.repository.execution_env_build import DEFAULT_TARGET

# check_model_name: also imported from here by tritonkit.tune.outputs (it lives in kinds.entry)
__all__ = ["PipelineSpec", "check_model_name", "load_spec", "parse_spec"]

_COMMON_KEYS = frozenset(
    {"name", "source", "generator", "files", "version", "variants", "steps", "requirements", "target",
     "bls_external", "openai"}
)  # fmt: skip


@functools.cache
def _model_keys() -> frozenset[str]:
    """Every key a spec model may have: the config's, the common ones and each kind's own."""
    return CONFIG_KEYS | frozenset(registry.spec_keys()) | _COMMON_KEYS


_TOP_KEYS = ("name", "models", "description", "requirements", "target", "image")


@dataclass(frozen=True, kw_only=True)
class PipelineSpec:
    name: str
    path: Path
    models: tuple[ModelEntry, ...]
    image: CustomImage | None = None  # the spec's own serving image, when it names one


def load_spec(path: str | Path, *, serving_root: str | None = None) -> PipelineSpec:
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
    return parse_spec(data, path=p, serving_root=serving_root)


def parse_spec(data: Any, *, path: Path, serving_root: str | None = None) -> PipelineSpec:
    """``serving_root``: the build's default for TensorRT-LLM stages' absolute paths."""
    if not isinstance(data, Mapping):
        raise SpecError("a spec must be a mapping with 'name' and 'models'", file=path)
    refuse_unknown_keys(data, _TOP_KEYS, what="unknown top-level key(s): ", spec=path)
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
    context = SpecContext(base=base, spec=path, target=shared.target, serving_root=serving_root)
    for i, raw in enumerate(models_raw):
        # A kind may stand for several models (TensorRT-LLM: tokenizer, engine, detokenizer, entry point).
        kind = registry.kind_for_spec(raw) if isinstance(raw, Mapping) else None
        expanded = [raw] if kind is None else kind.expand(raw, context=context)
        for one in expanded:
            entry = _model_entry(one, index=i, context=context, shared=shared)
            if entry.name in seen:
                raise SpecError(f"model '{entry.name}' is listed twice", file=path)
            seen.add(entry.name)
            models.append(entry)
    return PipelineSpec(name=name.strip(), path=path, models=tuple(models), image=shared.image)


@dataclass(frozen=True)
class _Shared:
    """Spec-level ``requirements``, ``target`` and ``image``, which every Python model inherits."""

    requirements: tuple[str, ...]
    target: str | None
    image: CustomImage | None = None

    @classmethod
    def parse(cls, data: Mapping[str, Any], *, spec: Path) -> _Shared:
        reqs = _requirements(data.get("requirements"), where=f"{spec}: requirements")
        target = data.get("target")
        if target is not None:
            target = resolve_target(target, where=f"{spec}: target").release
        if data.get("image") is None:
            return cls(reqs, target)
        image = parse_image(data["image"], spec=spec, default_base=target or DEFAULT_TARGET)
        return cls(reqs, image.base, image)


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
    if target is not None and shared.image is not None:
        raise SpecError(
            f"{where}: 'target' and the spec's 'image' both name the serving image",
            file=spec,
            hint="one image serves the repository: drop the model's target (image.base names its release)",
        )
    release = resolve_target(target, where=f"{spec}: {where}.target").release if target else shared.target
    reqs = own + shared.requirements
    if reqs:
        reqs = normalize_requirements(list(reqs), where=f"{spec}: {where}.requirements")
    return reqs, release


def _model_entry(raw: Any, *, index: int, context: SpecContext, shared: _Shared) -> ModelEntry:
    base, spec = context.base, context.spec
    where = f"models[{index}]"
    if not isinstance(raw, Mapping):
        raise SpecError(f"{where} must be a mapping", file=spec)
    name = check_model_name(raw.get("name"), where=f"{spec}: {where}")
    where = f"model '{name}'"
    allowed = _model_keys()
    refuse_unknown_keys(raw, allowed, what=f"{where}: unknown key(s) ", spec=spec)
    own = registry.kind_for_spec(raw)
    parsed = own.parse(raw, name=name, where=where, context=context) if own is not None else None
    if parsed is not None:
        if "openai" in raw:
            title = own.title if own is not None else "this model"
            raise SpecError(
                f"{where}: openai maps a pipeline's tensors; {title} is served through the front "
                "by its own tensors",
                file=spec,
                hint="put the openai key on the pipeline that calls it",
            )
        return parsed
    _refuse_other_kinds_keys(raw, where=where, spec=spec)
    source = _path(raw.get("source"), base=base, where=f"{where}.source", spec=spec)
    generator = _generator(raw.get("generator"), base=base, where=where, spec=spec)
    if source is not None and generator is not None:
        raise SpecError(f"{where}: give either source or generator, not both", file=spec)
    files_raw = raw.get("files", [])
    if not isinstance(files_raw, list):
        raise SpecError(f"{where}.files must be a list of paths", file=spec)
    files = tuple(_path(f, base=base, where=f"{where}.files", spec=spec) or base for f in files_raw)
    version = parse_version(raw, where=where, spec=spec)
    fields = {k: raw[k] for k in CONFIG_KEYS if k in raw}
    kind = _kind(fields, source, generator)
    steps_raw = raw.get("steps", [])
    if not isinstance(steps_raw, list):
        raise SpecError(f"{where}.steps must be a list", file=spec)
    _check_kind(
        kind, source=source, generator=generator, files=files, steps=steps_raw, where=where, spec=spec
    )
    variants = parse_variants(raw.get("variants"), where=where, spec=spec)
    if "openai" in raw:
        fields, variants = _with_openai(raw["openai"], fields, variants, name=name, spec=spec)
    requirements, target = _python_env(raw, kind, shared, where=where, spec=spec)
    bls_external = _bls_external(raw.get("bls_external"), kind, where=where, spec=spec)
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
        bls_external=bls_external,
    )


def _with_openai(
    mapping: Any,
    fields: dict[str, Any],
    variants: Mapping[str, Mapping[str, Any]],
    *,
    name: str,
    spec: Path,
) -> tuple[dict[str, Any], Mapping[str, Mapping[str, Any]]]:
    """The ``openai:`` mapping written into the config's ``parameters`` (and into each variant that
    sets its own), checked against that config's tensors, so a front before any Triton finds it."""

    def with_params(config: Mapping[str, Any]) -> dict[str, Any]:
        def names(key: str) -> list[str]:
            return [str(t.get("name")) for t in config.get(key) or () if isinstance(t, Mapping)]

        try:
            params = openai_parameters(
                mapping,
                model=name,
                inputs=names("inputs"),
                outputs=names("outputs"),
                decoupled=bool(config.get("decoupled", False)),
            )
        except SpecError as exc:
            raise SpecError(exc.message, file=spec, hint=exc.hint) from exc
        own = config.get("parameters") or {}
        if not isinstance(own, Mapping):
            return dict(config)  # the config's own check names the wrong parameters
        clash = sorted(k for k in params if k in own)
        if clash:
            raise SpecError(
                f"model '{name}': parameters {', '.join(clash)} are written from its openai key",
                file=spec,
                hint="declare the mapping once, under openai:",
            )
        return {**config, "parameters": {**own, **params}}

    out_variants: dict[str, Mapping[str, Any]] = {}
    for vname, overrides in variants.items():
        if "parameters" in overrides:  # a variant's parameters replace the model's: carry the mapping
            overrides = {**overrides, "parameters": with_params({**fields, **overrides})["parameters"]}
        out_variants[vname] = overrides
    return with_params(fields), MappingProxyType(out_variants)


def _refuse_other_kinds_keys(raw: Mapping[str, Any], *, where: str, spec: Path) -> None:
    """SpecError for keys only another kind takes (``engine`` on a Python model...)."""
    owners = registry.spec_keys()
    given = sorted(k for k in raw if k in owners)
    if given:
        raise SpecError(f"{where}: {', '.join(given)} only apply to {owners[given[0]].title}", file=spec)


def _bls_external(raw: Any, kind: ModelKind, *, where: str, spec: Path) -> tuple[str, ...]:
    """``bls_external``: model names a Python model's BLS calls may use that another repository
    serves (``tritonkit validate`` then does not ask for them in this one)."""
    if raw is None:
        return ()
    if kind is not ModelKind.PYTHON:
        raise SpecError(f"{where}: 'bls_external' is only for Python-backend models (BLS callers)", file=spec)
    if not isinstance(raw, list):
        raise SpecError(f"{where}.bls_external must be a list of model names", file=spec)
    return tuple(check_model_name(n, where=f"{spec}: {where}.bls_external") for n in raw)


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


def _kind(fields: Mapping[str, Any], source: Path | None, generator: tuple[Path, str] | None) -> ModelKind:
    platform = str(fields.get("platform", "") or "")
    backend = str(fields.get("backend", "") or "")
    for kind in registry.all_kinds():  # a kind with a ModelKind of its own, in the registry's precedence
        if kind.model_kind is not ModelKind.OTHER and kind.answers_for(backend=backend, platform=platform):
            return kind.model_kind
    if generator is not None:
        return ModelKind.ONNX  # a generator writes an ONNX graph
    if not backend and not platform and source is not None:
        by_file = registry.kind_for_source(source)
        if by_file is not None:
            return by_file.model_kind
    return ModelKind.OTHER


def _path(value: Any, *, base: Path, where: str, spec: Path) -> Path | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise SpecError(f"{where} must be a path string, got {value!r}", file=spec)
    return (base / value).resolve() if not Path(value).is_absolute() else Path(value)
