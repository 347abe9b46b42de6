"""The one repository walk: which models of a repository a backend serves.

Reads each model's ``config.pbtxt`` and, with ``variants``, its ``configs/*.pbtxt`` too (what
``tritonkit serve --model-config-name`` may load instead). A config that cannot be read is left
to the loader and to ``tritonkit validate`` to report; this walk only answers "which models".
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from tritonkit.config import read_config
from tritonkit.errors import TritonKitError

__all__ = ["config_files_of", "models_of"]


def config_files_of(
    repository: Path,
    backends: Collection[str],
    *,
    platforms: Collection[str] = (),
    variants: bool = False,
) -> dict[str, list[Path]]:
    """Model name -> its config files whose ``backend`` is one of ``backends`` (or whose
    ``platform`` is one of ``platforms``), models sorted by name.

    Hidden directories are skipped (not models tritonkit writes). ``variants``: look at
    ``configs/*.pbtxt`` as well as ``config.pbtxt``.
    """
    found: dict[str, list[Path]] = {}
    if not repository.is_dir():
        return found
    for model_dir in sorted(p for p in repository.iterdir() if p.is_dir() and not p.name.startswith(".")):
        candidates = [model_dir / "config.pbtxt"]
        if variants:
            candidates += sorted((model_dir / "configs").glob("*.pbtxt"))
        for config in candidates:
            if _says_backend(config, backends, platforms):
                found.setdefault(model_dir.name, []).append(config)
    return found


def models_of(
    repository: Path, backends: Collection[str], *, platforms: Collection[str] = (), variants: bool = False
) -> list[str]:
    """The names of the models of ``repository`` served by one of ``backends`` or ``platforms`` (sorted)."""
    return list(config_files_of(repository, backends, platforms=platforms, variants=variants))


def _says_backend(config: Path, backends: Collection[str], platforms: Collection[str]) -> bool:
    try:
        if not config.is_file():
            return False
        # Cheap test first: a server start runs this over every model of the repository.
        text = config.read_text(encoding="utf-8", errors="replace")
        if not any(b in text for b in (*backends, *platforms)):
            return False
        parsed = read_config(config)
        return parsed.backend in backends or parsed.platform in platforms
    except (OSError, TritonKitError):
        return False  # a broken config is the loader's (and `tritonkit validate`'s) to report
