"""Read what a model repository holds: models, their configs, their versions."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tritonkit.config import ModelConfig, new_config, read_config
from tritonkit.errors import RepositoryError

__all__ = ["RepoModel", "scan_repository", "version_dirs"]


@dataclass(frozen=True, kw_only=True)
class RepoModel:
    """One model directory: ``config`` is the parsed config.pbtxt (an empty config named after
    the directory when the file is missing: Triton may auto-complete it)."""

    name: str
    path: Path
    config: ModelConfig
    versions: tuple[int, ...]
    is_ensemble: bool
    has_config: bool = True


def version_dirs(model_dir: Path) -> tuple[int, ...]:
    """Numeric sub-directories (Triton's version directories), ascending."""
    out = []
    for child in model_dir.iterdir():
        if child.name.isdigit() and child.is_dir():
            out.append(int(child.name))
    return tuple(sorted(out))


def scan_repository(repo: str | Path, *, config_name: str | None = None) -> list[RepoModel]:
    """Every model directory of ``repo`` (every sub-directory, as Triton sees it), sorted by name.

    ``config_name`` picks ``configs/<name>.pbtxt`` where a model has it (Triton's
    ``--model-config-name``). Broken config text raises ConfigParseError (file and line).
    """
    root = Path(repo)
    if not root.is_dir():
        raise RepositoryError(
            f"{root} is not a directory", hint="build one with `tritonkit build SPEC -o DIR`"
        )
    models = []
    for child in sorted(root.iterdir()):
        if not child.is_dir():
            continue  # Triton takes every directory for a model (hidden ones too), never a file
        cfg_path = child / "config.pbtxt"
        if config_name:
            variant = child / "configs" / f"{config_name}.pbtxt"
            if variant.is_file():
                cfg_path = variant
        has_config = cfg_path.is_file()
        cfg = read_config(cfg_path) if has_config else new_config(name=child.name)
        models.append(
            RepoModel(
                name=child.name,
                path=child,
                config=cfg,
                versions=version_dirs(child),
                is_ensemble=cfg.platform == "ensemble",
                has_config=has_config,
            )
        )
    return models
