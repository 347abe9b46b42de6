"""The credential options, declared once and given alike to `infer`, `perf` and `tune`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tritonkit.cli.app import main

AUTH_FLAGS = ["--key-env", "EP_KEY", "--restricted-header", "triton-admin-key=ADMIN_KEY"]
AUTH_FLAGS += ["--deployment", "blue"]


class _StopError(Exception):
    """Ends a command once the library call received its arguments (no server in a unit test)."""


@pytest.mark.parametrize("verb", ["infer", "perf", "tune"])
def test_each_verb_builds_the_same_auth_from_the_credential_options(
    verb: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stand-ins replace the library entry points (TritonClient, run_perf, tune) to record the
    ``auth`` and CA bundle each command hands over."""
    seen: dict[str, Any] = {}
    monkeypatch.setenv("EP_KEY", "k-123")
    monkeypatch.setenv("ADMIN_KEY", "a-456")
    cacert = tmp_path / "ca.pem"
    cacert.write_text("not read by the stand-ins\n")

    def record(*args: Any, **kwargs: Any) -> Any:
        seen.update(kwargs)
        if args and hasattr(args[0], "cacert"):
            seen["cacert"] = args[0].cacert
        raise _StopError

    target = {"infer": "tritonkit.cli.infer.TritonClient", "perf": "tritonkit.cli.perf.benchmark"}
    monkeypatch.setattr(target.get(verb, "tritonkit.cli.tune.tune_to_files"), record)
    where = str(tmp_path) if verb == "tune" else "http://127.0.0.1:1"
    extra = ["--out", str(tmp_path / "o")] if verb == "tune" else []
    with pytest.raises(_StopError):
        main([verb, where, "m", *AUTH_FLAGS, "--cacert", str(cacert), *extra])
    headers = seen["auth"].headers()
    assert headers["Authorization"] == "Bearer k-123"
    assert headers["triton-admin-key"] == "a-456"
    assert headers["azureml-model-deployment"] == "blue"
    assert str(seen["cacert"]) == str(cacert)
