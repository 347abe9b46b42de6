import pytest

from tritonkit._extras import require
from tritonkit.errors import MissingExtraError


def test_require_returns_module_when_installed() -> None:
    assert require("json", feature="x").__name__ == "json"


def test_require_names_the_extra_when_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def fake_import(name: str, *args: object, **kwargs: object) -> object:
        if name.startswith("matplotlib"):
            raise ImportError("no matplotlib")
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(MissingExtraError) as info:
        require("matplotlib.pyplot", feature="--plot")
    assert "tritonkit[plot]" in str(info.value)
