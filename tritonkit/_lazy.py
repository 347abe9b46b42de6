"""Lazy re-exports for package ``__init__`` files (PEP 562).

A package's ``__init__`` runs whenever any of its modules is imported, so one that imported its
whole public surface would make every module cost the package's heaviest floor (and would tie
import circles through it). Each package instead imports its public names for type checkers
only, and ``lazy_exports`` reads those imports back to give it the module ``__getattr__`` and
``__dir__`` that import a name's home on first use and keep it in the package's namespace::

    if TYPE_CHECKING:
        from tritonkit.client.endpoint import Endpoint, parse_url

    __getattr__, __dir__ = lazy_exports(__name__, __file__)

The imports are the one list of where each name lives: no second table to keep in step.
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, init_file: str) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``package``'s ``__getattr__`` and ``__dir__``: every name its ``__init__`` (``init_file``)
    imports under ``if TYPE_CHECKING:`` loads from that module on first use. The file is read
    when a name is first asked for, not when the package is imported."""
    homes: dict[str, tuple[str, str]] = {}

    def where() -> dict[str, tuple[str, str]]:
        if not homes:
            homes.update(_type_checking_imports(Path(init_file).read_text(encoding="utf-8")))
        return homes

    def get_attribute(name: str) -> Any:
        home = where().get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, attribute = home
        value = getattr(importlib.import_module(module), attribute)
        setattr(sys.modules[package], name, value)
        return value

    def names() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where()))

    return get_attribute, names


def _type_checking_imports(source: str) -> dict[str, tuple[str, str]]:
    """Name -> (module, attribute) for each ``from M import A [as N]`` in the module-level
    ``if TYPE_CHECKING:`` blocks of ``source``."""
    found: dict[str, tuple[str, str]] = {}
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.If) and _is_type_checking(node.test)):
            continue
        for statement in node.body:
            if isinstance(statement, ast.ImportFrom) and statement.module and not statement.level:
                for alias in statement.names:
                    found[alias.asname or alias.name] = (statement.module, alias.name)
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )
