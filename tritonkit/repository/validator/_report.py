"""Moved to tritonkit.repository.validator.report (public: the backend kinds' checks report through it)."""

# moved to tritonkit.repository.validator.report; kept for tritonkit.tune.control
from tritonkit.repository.validator.report import ConfigFile, Problem

__all__ = ["ConfigFile", "Problem"]
