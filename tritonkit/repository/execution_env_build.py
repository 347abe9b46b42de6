"""The builder's side of packed environments: pack, point EXECUTION_ENV_PATH, check imports.

``prepare`` runs first (a requirement that cannot be resolved fails the build before a file is
written); ``finish`` runs on each model directory the builder writes into its scratch directory.
Archives are kept in the model's own directory, hard-linked from the cache: a Triton model
directory must be self-contained (cloud repositories download each model on its own, so a ``../other_model``
reference would break there), and the hard link keeps one copy on disk per requirement set.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from tritonkit.config import ModelConfig
from tritonkit.errors import ModelImportError, SpecError
from tritonkit.kinds.entry import ModelEntry, ModelKind
from tritonkit.repository import execution_env
from tritonkit.repository.custom_image import CustomImage
from tritonkit.repository.image_packages import release_target
from tritonkit.repository.scan import version_dirs
from tritonkit.repository.validator.imports import check_python_imports

__all__ = ["DEFAULT_TARGET", "finish", "prepare", "recorded_targets"]

log = logging.getLogger(__name__)

#: The release a spec's Python models target when it names none: the Triton (2.51) that
#: `tritonkit serve` runs locally from nvidia-pytriton.
DEFAULT_TARGET = "24.10"


def prepare(
    entries: Sequence[ModelEntry],
    *,
    cache_dir: Path | None = None,
    image: CustomImage | None = None,
    pip: execution_env.PipOptions | None = None,
) -> tuple[list[ModelEntry], dict[str, execution_env.PackedEnv]]:
    """Pack every distinct requirement set once; return the entries with EXECUTION_ENV_PATH set.

    With a custom ``image``, requirements it already satisfies are not packed (a model whose
    requirements it has in full gets no archive); ``pip`` says where the wheels come from.
    """
    out: list[ModelEntry] = []
    envs: dict[str, execution_env.PackedEnv] = {}
    by_key: dict[str, execution_env.PackedEnv] = {}
    for entry in entries:
        requirements = _to_pack(entry, image)
        if entry.kind is not ModelKind.PYTHON or not requirements:
            out.append(entry)
            continue
        _refuse_own_env_parameter(entry)
        if image is not None:
            target = image.triton_target()
            recipe = execution_env.image_recipe(requirements, target, pins=image.pins, image=image.name)
        else:
            target = execution_env.resolve_target(entry.target or DEFAULT_TARGET, where=entry.where)
            recipe = execution_env.target_recipe(requirements, target)
        env = by_key.get(recipe.key)
        if env is None:
            env = execution_env.build_env(recipe, cache_dir=cache_dir, where=entry.where, pip=pip)
            by_key[recipe.key] = env
            log.info(
                "%s Python environment %s for tritonserver %s (Python %s): %s",
                "reused cached" if env.cached else "packed",
                env.path.name,
                target.release,
                target.python,
                ", ".join(requirements),
            )
        envs[entry.name] = env
        out.append(_with_parameter(entry, execution_env.model_dir_reference(env.path.name)))
    return out, envs


def _to_pack(entry: ModelEntry, image: CustomImage | None) -> tuple[str, ...]:
    if image is None:
        return entry.requirements
    kept = tuple(r for r in entry.requirements if not image.provides(r))
    if len(kept) < len(entry.requirements):
        log.info(
            "%s: not packing %s (the image %s has them)",
            entry.where,
            ", ".join(r for r in entry.requirements if r not in kept),
            image.name,
        )
    return kept


def finish(
    entry: ModelEntry,
    model_dir: Path,
    envs: Mapping[str, execution_env.PackedEnv],
    config: ModelConfig,
    *,
    image: CustomImage | None = None,
) -> None:
    """Place the model's archive and refuse imports its production image cannot satisfy
    (``config``: the model's config.pbtxt as written; ``image``: the spec's own image)."""
    env = envs.get(entry.name)
    if env is not None:
        execution_env.link_into(env.path, model_dir / env.path.name)
    if entry.kind is not ModelKind.PYTHON:
        return
    problems = check_python_imports(
        config,
        model=entry.name,
        model_dir=model_dir,
        display_dir=entry.name,
        versions=version_dirs(model_dir),
        target=image.target()
        if image is not None
        else release_target(entry.target or DEFAULT_TARGET, where=entry.where),
    )
    if problems:
        where = str(entry.source) if entry.source is not None else entry.where
        lines = "\n".join(f"  {where}:{p.line}: {p.message}" for p in problems)
        raise ModelImportError(
            f"{entry.where}: the model imports modules its production image will not have; "
            f"nothing was written:\n{lines}",
            hint="add the packages to the model's `requirements:` (or the spec's), then build again"
            + ("" if image is not None else "; a custom image that has them: the spec's `image:` key"),
        )


def recorded_targets(entries: Sequence[ModelEntry]) -> dict[str, str]:
    """model -> the NGC release its Python code was checked and packed for (for the manifest)."""
    return {
        e.name: execution_env.resolve_target(e.target or DEFAULT_TARGET, where=e.where).release
        for e in entries
        if e.kind is ModelKind.PYTHON
    }


def _refuse_own_env_parameter(entry: ModelEntry) -> None:
    params = entry.fields.get("parameters") or {}
    if isinstance(params, Mapping) and execution_env.ENV_PARAMETER in params:
        raise SpecError(
            f"{entry.where}: sets parameters.{execution_env.ENV_PARAMETER} and 'requirements'",
            hint="drop one: tritonkit packs 'requirements' into the environment it points to",
        )


def _with_parameter(entry: ModelEntry, value: str) -> ModelEntry:
    fields = dict(entry.fields)
    fields["parameters"] = _add(fields.get("parameters"), value)
    variants = {
        name: MappingProxyType({**v, "parameters": _add(v["parameters"], value)}) if "parameters" in v else v
        for name, v in entry.variants.items()
    }
    return replace(entry, fields=MappingProxyType(fields), variants=MappingProxyType(variants))


def _add(params: Any, value: str) -> dict[str, Any]:
    merged = dict(params) if isinstance(params, Mapping) else {}
    merged[execution_env.ENV_PARAMETER] = value
    return merged
