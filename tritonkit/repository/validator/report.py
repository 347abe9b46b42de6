"""Problems, the report and what the checks are told: the validator's names for
:mod:`tritonkit.kinds.rules`, the leaf the backend kinds' checks import too."""

from __future__ import annotations

from tritonkit.kinds.rules import (
    ConfigFile,
    FileContext,
    ModelDirectory,
    Problem,
    RepositoryContext,
    Severity,
    ValidationReport,
)

__all__ = [
    "ConfigFile",
    "FileContext",
    "ModelDirectory",
    "Problem",
    "RepositoryContext",
    "Severity",
    "ValidationReport",
]
