"""The curated public surface of the top-level package."""

import sys
from pathlib import Path

import pytest

import tritonkit
from tritonkit.errors import TritonKitError


def test_all_is_sorted_and_importable() -> None:
    names = [n for n in tritonkit.__all__ if n != "__version__"]
    assert names == sorted(names)
    for name in tritonkit.__all__:
        assert hasattr(tritonkit, name), name


def test_every_exported_error_derives_from_tritonkit_error() -> None:
    for name in tritonkit.__all__:
        obj = getattr(tritonkit, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, TritonKitError), name


def test_every_package_all_resolves_through_its_lazy_exports() -> None:
    """Package __init__ files load their public names on first use (tritonkit/_lazy.py): each name
    of a package's __all__ is there, and dir() lists it before it is loaded."""
    import importlib

    packages = (
        "client",
        "config",
        "deploy",
        "deploy.aks",
        "deploy.aml",
        "kinds",
        "openai_front",
        "perf",
        "repository",
        "repository.validator",
        "server",
        "tune",
    )
    for name in packages:
        package = importlib.import_module(f"tritonkit.{name}")
        assert set(package.__all__) <= set(dir(package)), name
        for exported in package.__all__:
            assert getattr(package, exported) is not None, f"tritonkit.{name}.{exported}"


def test_lazy_exports_load_each_type_checking_import_of_the_init_on_first_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The package's TYPE_CHECKING imports are its one table of homes (tritonkit/_lazy.py)."""
    package = tmp_path / "lazy_probe"
    package.mkdir()
    (package / "home.py").write_text("VALUE = 41\nOTHER = 'other'\n")
    (package / "__init__.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from tritonkit._lazy import lazy_exports\n"
        "if TYPE_CHECKING:\n"
        "    from lazy_probe.home import VALUE, OTHER as RENAMED\n"
        "__getattr__, __dir__ = lazy_exports(__name__, __file__)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import lazy_probe  # type: ignore[import-not-found]

    try:
        assert "lazy_probe.home" not in sys.modules  # nothing loads with the package
        assert {"VALUE", "RENAMED"} <= set(dir(lazy_probe))
        assert (lazy_probe.VALUE, lazy_probe.RENAMED) == (41, "other")
        assert "lazy_probe.home" in sys.modules
        with pytest.raises(AttributeError, match="has no attribute 'OTHER'"):
            lazy_probe.OTHER  # noqa: B018 - only the name it was imported as
    finally:
        sys.modules.pop("lazy_probe", None)
        sys.modules.pop("lazy_probe.home", None)
