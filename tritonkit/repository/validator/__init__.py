"""Static validation of a model repository: what Triton would reject at load time, with lines.

``validate_repository(repo)`` never raises for a broken model: garbage config text, missing
files and bad wiring all become :class:`Problem` entries (file, line, code, message). Only a
repository path that is not a directory, an unknown ``target`` release or an unreadable
``image_requirements`` file raise (RepositoryError, SpecError).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tritonkit._lazy import lazy_exports

if TYPE_CHECKING:
    from tritonkit.repository.image_packages import ImageTarget
    from tritonkit.repository.validator.report import ConfigFile, Problem, ValidationReport
    from tritonkit.repository.validator.validate import (
        FILE_CHECKS,
        FileCheck,
        image_target,
        validate_repository,
    )

# The names imported above load on first use: importing one module of the package costs only its
# own floor.
__getattr__, __dir__ = lazy_exports(__name__, __file__)

__all__ = [
    "FILE_CHECKS",
    "ConfigFile",
    "FileCheck",
    "ImageTarget",
    "Problem",
    "ValidationReport",
    "image_target",
    "validate_repository",
]
