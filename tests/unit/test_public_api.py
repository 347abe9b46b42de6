"""The curated public surface of the top-level package."""

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
