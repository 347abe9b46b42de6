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
