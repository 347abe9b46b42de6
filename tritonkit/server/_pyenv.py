"""Serve packed Python environments locally: a twin for the local stub's interpreter.

A repository built for a production image carries archives for the image's Python (3.10 for
tritonserver 24.xx), whose ``bin/python3`` is the image's ``/usr/bin/python3``. The local server
runs the nvidia-pytriton stub of THIS interpreter, which cannot load those compiled wheels. So
for every tritonkit archive the local server gets a *twin*: the same requirement set resolved
for this interpreter (the very same wheels when the Python versions match), plus the image's
numpy pin, and nothing from the venv tritonkit runs in. A package missing from the spec's
``requirements`` therefore fails here exactly as it would in the image.

The twin is wired in through a shadow repository (a temporary directory of links to the real
model files, with each affected ``config.pbtxt`` re-written to point at the twin), so the
user's repository is never modified.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from tritonkit.config import read_config, write_config
from tritonkit.errors import ConfigParseError
from tritonkit.repository import pyenv

logger = logging.getLogger(__name__)

__all__ = ["TwinNote", "shadow_repository"]


@dataclass(frozen=True)
class TwinNote:
    """One model served through a local twin of its packed environment."""

    model: str
    archive: str  # the archive named by the repository's config
    twin: Path
    target_python: str
    local_python: str
    requirements: tuple[str, ...]

    def __str__(self) -> str:
        same = "same Python" if self.target_python == self.local_python else "different Python"
        return (
            f"model '{self.model}': serving {self.archive} (Python {self.target_python}) through a local "
            f"twin for Python {self.local_python} ({same}; same requirements: "
            f"{', '.join(self.requirements) or 'none'}) at {self.twin}"
        )


def shadow_repository(
    repository: Path, workdir: Path, *, environments: Mapping[Path, str] | None = None
) -> tuple[Path, list[TwinNote]]:
    """The repository the local server should load, and the twins it uses.

    ``environments`` sets the environment of further config files (config file -> environment
    directory; the vLLM stages' engine venv). Returns ``repository`` itself when no model uses a
    tritonkit archive and ``environments`` is empty.
    """
    plans: dict[str, dict[Path, str]] = {}  # model -> {config file: twin path}
    for cfg_path, env in (environments or {}).items():
        model = cfg_path.parent.name if cfg_path.name == "config.pbtxt" else cfg_path.parent.parent.name
        plans.setdefault(model, {})[cfg_path] = env
    notes: list[TwinNote] = []
    twins: dict[str, Path] = {}
    for model_dir in sorted(p for p in repository.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for cfg_path in [model_dir / "config.pbtxt", *sorted((model_dir / "configs").glob("*.pbtxt"))]:
            archive_value = _env_parameter(cfg_path)
            if archive_value is None:
                continue
            archive = pyenv.resolve_env_path(archive_value, model_dir)
            meta = pyenv.read_metadata(archive) if archive is not None and archive.is_file() else None
            if meta is None or archive is None:
                continue  # not a tritonkit archive: Triton loads it as it is
            recipe = pyenv.local_recipe(meta)
            if recipe.python == meta.get("python"):
                recipe = _same_wheels(recipe, meta)
            twin = twins.get(recipe.key)
            if twin is None:
                twin = pyenv.build_env(recipe, where=f"model '{model_dir.name}' (local twin)").path
                twins[recipe.key] = twin
            plans.setdefault(model_dir.name, {})[cfg_path] = str(twin)
            if cfg_path.name == "config.pbtxt" or not any(n.model == model_dir.name for n in notes):
                notes.append(
                    TwinNote(
                        model=model_dir.name,
                        archive=archive.name,
                        twin=twin,
                        target_python=str(meta.get("python")),
                        local_python=recipe.python,
                        requirements=recipe.requirements,
                    )
                )
    if not plans:
        return repository, []
    shadow = workdir / "repository"
    shadow.mkdir(parents=True, exist_ok=True)
    for model_dir in sorted(p for p in repository.iterdir() if p.is_dir() and not p.name.startswith(".")):
        _mirror(model_dir, shadow / model_dir.name, plans.get(model_dir.name, {}))
    for note in notes:
        logger.info("%s", note)
    return shadow, notes


def _same_wheels(recipe: pyenv.EnvRecipe, meta: dict[str, object]) -> pyenv.EnvRecipe:
    platforms = meta.get("platforms")
    if isinstance(platforms, list) and platforms:
        return replace(recipe, platforms=tuple(str(p) for p in platforms))
    return recipe


def _env_parameter(cfg_path: Path) -> str | None:
    if not cfg_path.is_file():
        return None
    try:
        cfg = read_config(cfg_path)
    except ConfigParseError:
        return None  # Triton reports it; nothing to twin
    if cfg.backend != "python" or pyenv.ENV_PARAMETER not in cfg.parameters:
        return None
    return str(cfg.parameters[pyenv.ENV_PARAMETER].string_value)


def _mirror(src: Path, dst: Path, rewrites: dict[Path, str]) -> None:
    """``dst`` mirrors ``src`` with links; the config files in ``rewrites`` are re-written copies."""
    dst.mkdir()
    for child in sorted(src.iterdir()):
        if child.name == "configs" and child.is_dir() and any(p.parent == child for p in rewrites):
            _mirror(child, dst / "configs", rewrites)
            continue
        if child in rewrites:
            cfg = read_config(child)
            cfg.parameters[pyenv.ENV_PARAMETER].string_value = rewrites[child]
            write_config(cfg, dst / child.name)
            os.chmod(dst / child.name, 0o644)
            continue
        os.symlink(child.resolve(), dst / child.name)
