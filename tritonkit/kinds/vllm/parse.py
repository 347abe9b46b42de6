"""Parse a ``backend: vllm`` spec model's keys into a checked :class:`VllmSpec`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from tritonkit.errors import SpecError
from tritonkit.kinds.entry import entry_line as _line
from tritonkit.kinds.vllm.spec import (
    ADDITIONAL_OUTPUTS,
    HUB_ID,
    LORA_NAME,
    SHARED_KEYS,
    TOKENIZER_FILES,
    VARIANT_KEYS,
    VLLM_KEYS,
    VllmSpec,
    has_tokenizer,
)

__all__ = ["parse_vllm_spec"]


def parse_vllm_spec(raw: Mapping[str, Any], *, base: Path, where: str, spec: Path) -> VllmSpec:
    """Check the keys of a ``backend: vllm`` spec model (``raw``); paths resolve against ``base``."""
    bad = sorted(str(k) for k in raw if k not in SHARED_KEYS | VLLM_KEYS)
    if bad:
        raise SpecError(
            f"{where}: {', '.join(bad)} do(es) not apply to a vLLM stage",
            file=spec,
            line=_line(spec, where),
            hint="a vLLM stage takes model, engine, lora, additional_outputs, instance_group, "
            "parameters, version; NVIDIA's backend fixes its inputs, outputs and batching",
        )
    if raw.get("max_batch_size", 0) != 0:
        raise SpecError(
            f"{where}.max_batch_size must be 0 for a vLLM stage (vLLM batches on its own)",
            file=spec,
            line=_line(spec, where, "max_batch_size"),
        )
    if raw.get("decoupled", True) is not True:
        raise SpecError(
            f"{where}: a vLLM stage is always decoupled (NVIDIA's backend asserts it)",
            file=spec,
            line=_line(spec, where, "decoupled"),
            hint="drop 'decoupled: false'",
        )
    engine = _engine(raw.get("engine"), where=where, spec=spec)
    model_dir, hub_id = _model(raw.get("model"), engine, base=base, where=where, spec=spec)
    lora = _lora(raw.get("lora"), engine, base=base, where=where, spec=spec)
    outputs = _additional_outputs(raw.get("additional_outputs"), where=where, spec=spec)
    for vname, vdata in (raw.get("variants") or {}).items():
        if isinstance(vdata, Mapping):
            extra = sorted(str(k) for k in vdata if k not in VARIANT_KEYS)
            if extra:
                raise SpecError(
                    f"{where}.variants.{vname}: a vLLM stage's variant may set only "
                    f"{', '.join(sorted(VARIANT_KEYS))}, not {', '.join(extra)}",
                    file=spec,
                    line=_line(spec, where, "variants", vname),
                )
    return VllmSpec(
        model_dir=model_dir,
        hub_id=hub_id,
        engine=MappingProxyType(dict(engine)),
        lora=MappingProxyType(lora),
        additional_outputs=outputs,
    )


def _engine(raw: Any, *, where: str, spec: Path) -> dict[str, Any]:
    given = _mapping(
        raw,
        "engine",
        "vLLM engine argument names to values",
        where=where,
        spec=spec,
        hint="e.g. engine: {max_model_len: 2048, gpu_memory_utilization: 0.9}",
    )
    out: dict[str, Any] = {}
    for key, value in given.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise SpecError(
                f"{where}.engine: {key!r} is not an engine argument name",
                file=spec,
                line=_line(spec, where, "engine", str(key)),
                hint="use the Python name (max_model_len), not the CLI flag (--max-model-len)",
            )
        _check_json(value, where=f"{where}.engine.{key}", spec=spec, at=("engine", key))
        out[key] = value
    return out


def _mapping(
    raw: Any, key: str, what: str, *, where: str, spec: Path, hint: str | None = None, empty: bool = True
) -> Mapping[Any, Any]:
    """The spec's ``key`` (``raw``) as a mapping, ``{}`` when it is absent; refused unless it maps
    ``what`` (and, unless ``empty``, when it maps nothing)."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping) or not (raw or empty):
        raise SpecError(f"{where}.{key} must map {what}", file=spec, line=_line(spec, where, key), hint=hint)
    return raw


def _check_json(value: Any, *, where: str, spec: Path, at: tuple[str | int, ...] = ()) -> None:
    """model.json is JSON: refuse what YAML can hold but JSON cannot (dates, NaN, odd keys)."""
    if value is None or isinstance(value, bool | int | str):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise SpecError(
                f"{where}: {value} cannot be written to JSON", file=spec, line=_line(spec, where, *at)
            )
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            _check_json(item, where=f"{where}[{i}]", spec=spec, at=(*at, i))
        return
    if isinstance(value, Mapping):
        for k, item in value.items():
            if not isinstance(k, str):
                raise SpecError(
                    f"{where}: key {k!r} must be a string in JSON", file=spec, line=_line(spec, where, *at)
                )
            _check_json(item, where=f"{where}.{k}", spec=spec, at=(*at, k))
        return
    raise SpecError(
        f"{where}: a {type(value).__name__} cannot be written to model.json",
        file=spec,
        line=_line(spec, where, *at),
        hint="quote it to make it a string",
    )


def _model(
    raw: Any, engine: Mapping[str, Any], *, base: Path, where: str, spec: Path
) -> tuple[Path | None, str | None]:
    if raw is None:
        if "model" not in engine:
            raise SpecError(
                f"{where}: a vLLM stage needs 'model': a local Hugging Face model directory or a hub id",
                file=spec,
                line=_line(spec, where),
                hint="e.g. model: tiny_llm/ (relative to the spec) or model: facebook/opt-125m",
            )
        return None, None  # engine.model is written as given
    if "model" in engine:
        raise SpecError(
            f"{where}: give the model once, as 'model:' or as 'engine.model', not both",
            file=spec,
            line=_line(spec, where, "model"),
        )
    if not isinstance(raw, str) or not raw.strip():
        raise SpecError(
            f"{where}.model must be a path or a hub id, got {raw!r}",
            file=spec,
            line=_line(spec, where, "model"),
        )
    path = Path(raw) if Path(raw).is_absolute() else (base / raw)
    if path.is_dir():
        model_dir = path.resolve()
        if not (model_dir / "config.json").is_file():
            raise SpecError(
                f"{where}.model: {model_dir} has no config.json; it is not a Hugging Face model directory",
                file=spec,
                line=_line(spec, where, "model"),
                hint="point 'model' at the directory save_pretrained() wrote",
            )
        if not has_tokenizer(model_dir) and not _tokenizer_elsewhere(engine):
            raise SpecError(
                f"{where}.model: {model_dir} has no tokenizer ({', '.join(TOKENIZER_FILES[:3])}, ...)",
                file=spec,
                line=_line(spec, where, "model"),
                hint="save the tokenizer into the same directory (tokenizer.save_pretrained), or set "
                "engine.tokenizer / engine.skip_tokenizer_init",
            )
        return model_dir, None
    if path.exists():
        raise SpecError(
            f"{where}.model: {path} is a file, expected a model directory",
            file=spec,
            line=_line(spec, where, "model"),
        )
    if Path(raw).is_absolute() or raw.startswith(".") or not HUB_ID.match(raw):
        raise SpecError(
            f"{where}.model: directory not found: {path}",
            file=spec,
            line=_line(spec, where, "model"),
            hint="fix the path (relative to the spec file), or give a Hugging Face hub id such as org/name",
        )
    return None, raw


def _tokenizer_elsewhere(engine: Mapping[str, Any]) -> bool:
    return bool(engine.get("tokenizer")) or str(engine.get("skip_tokenizer_init", "")).lower() == "true"


def _lora(raw: Any, engine: Mapping[str, Any], *, base: Path, where: str, spec: Path) -> dict[str, Path]:
    given = _mapping(raw, "lora", "LoRA names to adapter directories", where=where, spec=spec, empty=False)
    if not given:  # absent (an empty one is refused)
        return {}
    if str(engine.get("enable_lora", "")).lower() != "true":
        raise SpecError(
            f"{where}: 'lora' needs engine.enable_lora: true",
            file=spec,
            line=_line(spec, where, "lora"),
            hint="NVIDIA's backend reads multi_lora.json only when enable_lora is on",
        )
    out: dict[str, Path] = {}
    for name, value in given.items():
        if not isinstance(name, str) or not LORA_NAME.match(name):
            raise SpecError(
                f"{where}.lora: {name!r} is not a plain LoRA name (letters, digits, '_', '-', '.')",
                file=spec,
                line=_line(spec, where, "lora"),
            )
        if not isinstance(value, str) or not value:
            raise SpecError(
                f"{where}.lora.{name} must be a directory path, got {value!r}",
                file=spec,
                line=_line(spec, where, "lora", name),
            )
        path = Path(value) if Path(value).is_absolute() else base / value
        if not path.is_dir():
            raise SpecError(
                f"{where}.lora.{name}: adapter directory not found: {path}",
                file=spec,
                line=_line(spec, where, "lora", name),
                hint="fix the path (relative to the spec file)",
            )
        if not (path / "adapter_config.json").is_file():
            raise SpecError(
                f"{where}.lora.{name}: {path} has no adapter_config.json; vLLM loads PEFT adapters",
                file=spec,
                line=_line(spec, where, "lora", name),
            )
        out[name] = path.resolve()
    return out


def _additional_outputs(raw: Any, *, where: str, spec: Path) -> tuple[str, ...]:
    if raw is None:
        return ()
    if raw == "all":
        return tuple(ADDITIONAL_OUTPUTS)
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise SpecError(
            f"{where}.additional_outputs must be a list of output names or 'all'",
            file=spec,
            line=_line(spec, where, "additional_outputs"),
            hint=f"known: {', '.join(ADDITIONAL_OUTPUTS)}",
        )
    unknown = [x for x in raw if x not in ADDITIONAL_OUTPUTS]
    if unknown:
        raise SpecError(
            f"{where}.additional_outputs: unknown {', '.join(unknown)}",
            file=spec,
            line=_line(spec, where, "additional_outputs"),
            hint=f"NVIDIA's vLLM backend has: {', '.join(ADDITIONAL_OUTPUTS)}",
        )
    # config order follows the backend's own, whatever order the spec lists them in
    return tuple(name for name in ADDITIONAL_OUTPUTS if name in raw)
