"""The package's shape, held where issue #30 left it (figures from scripts/arch_metrics.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _figures() -> dict[str, list[str]]:
    spec = importlib.util.spec_from_file_location("arch_metrics", ROOT / "scripts" / "arch_metrics.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["arch_metrics"] = module
    spec.loader.exec_module(module)
    return module.figures()  # type: ignore[no-any-return]


FIGURES = _figures()


def test_package_has_no_import_circles_counting_lazy_and_type_checking_imports() -> None:
    assert FIGURES["import_circles"] == []


def test_no_module_outside_triton_side_code_is_over_600_lines() -> None:
    assert FIGURES["modules_over_600_lines"] == []


def test_no_function_is_over_120_lines() -> None:
    assert FIGURES["functions_over_120_lines"] == []


def test_backend_names_stand_in_at_most_four_modules() -> None:
    assert len(FIGURES["modules_naming_backend_strings"]) <= 4, FIGURES["modules_naming_backend_strings"]


def test_no_package_imports_another_packages_private_module() -> None:
    assert FIGURES["private_imports_across_packages"] == []


def test_every_public_exception_derives_from_tritonkit_error() -> None:
    assert FIGURES["exceptions_outside_tree"] == []
