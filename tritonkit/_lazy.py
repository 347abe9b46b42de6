"""Lazy re-exports for package ``__init__`` files (PEP 562).

A package's ``__init__`` runs whenever any of its modules is imported, so one that imported its
whole public surface would make every module cost the package's heaviest floor (and would tie
import circles through it). Each package instead names where its public names live;
``lazy_exports`` gives it the module ``__getattr__`` and ``__dir__`` that import a name's home on
first use and keep it in the package's namespace::

    __getattr__, __dir__ = lazy_exports(__name__, {"client": ("Client",), "endpoint": ("parse_url",)})

with the same names imported under ``TYPE_CHECKING`` for type checkers.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, homes: Mapping[str, Iterable[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``package``'s ``__getattr__`` and ``__dir__`` for ``homes``: sub-module (relative to
    ``package``, or a full ``tritonkit.`` name) -> the names it exports."""
    where = {name: module for module, names in homes.items() for name in names}

    def get_attribute(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        full = module if module.startswith("tritonkit.") else f"{package}.{module}"
        value = getattr(importlib.import_module(full), name)
        setattr(sys.modules[package], name, value)
        return value

    def names() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where))

    return get_attribute, names
